"""Lambda entry points: Powertools decorators plus one call into ``osprey_control``. Logic never imports these."""
