"""``osprey local``: the control plane on an embedded moto server, with a simulated fleet (no AWS account)."""
