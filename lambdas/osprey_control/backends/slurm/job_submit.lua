--[[
Osprey's Slurm job submit plugin (job_submit/lua), rendered by `osprey slurm submit-plugin` for the
priority range @RANGE@ (docs/slurm.md, "New jobs mid-range at submission").

Why: Osprey writes each managed job's priority through slurmrestd once per cycle. Until its first write a
job has its own priority, 1 with AWS ParallelCluster's slurm.conf: the bottom of Osprey's range, behind every
job Osprey has ranked, at the very moment slurmctld's main scheduler (which runs at submission) decides
whether it starts. This plugin runs inside slurmctld before the job exists, so the job is created at the
priority Osprey would start it from: its own `osprey:initial-priority`, else 50 (a policy's default
`initialPriority`), mapped onto the range exactly as the applier maps it (the table below is generated from
osprey_control.backends.slurm.SlurmPriorityRange; do not edit it by hand, render the script again).

What it touches: only a job whose comment opts it in (exactly `osprey:enabled=true` and `osprey:policy=NAME`;
or, without that tag, exactly `OSPREY_ENABLED=1` and `OSPREY_PRIORITY_POLICY=NAME`), read as
osprey_control.backends.slurm.marker reads it (osprey_control.contract.opt_in: `True`, ` TRUE ` or a tag of `1`
do not opt in), and only when the submission sets no priority of its own (`sbatch --hold` submits priority 0; an operator may submit one).
Every other job, and every modification (`scontrol update`, Osprey's own writes), is left as it is.
]]

local OSPREY_PRIORITY = {
@PRIORITIES@
}
local OSPREY_DEFAULT = @DEFAULT@

-- The comment's tokens, split on commas, semicolons and white space; the last value of a key wins.
local function osprey_fields(comment)
    local fields = {}
    for token in string.gmatch(comment or "", "[^,;%s]+") do
        local key, value = string.match(token, "^([^=]*)=(.*)$")
        if key ~= nil then
            fields[key] = value
        end
    end
    return fields
end

-- The one definition of opt-in (osprey_control.contract.opt_in): exactly `accepted`, nothing that lower-cases
-- to it; `refused` opts out; anything else is not an opt-in either.
local function truth(value, accepted, refused)
    if value == accepted then
        return true
    end
    if value == refused then
        return false
    end
    return nil
end

-- A policy name: a DNS-1123 label (osprey_control.contract), which every managed job names.
local function policy_name(value)
    if value == nil or #value > 63 then
        return false
    end
    return string.match(value, "^[a-z0-9]$") ~= nil or string.match(value, "^[a-z0-9][-a-z0-9]*[a-z0-9]$") ~= nil
end

-- The Osprey priority (0..100) a new job starts from, or nil when Osprey will not manage it: not opted in,
-- or opted in without a valid policy name (Osprey reports that job as a problem and never writes it).
local function osprey_start_priority(comment)
    local fields = osprey_fields(comment)
    local enabled, policy, initial
    if fields["osprey:enabled"] ~= nil then
        enabled, policy = truth(fields["osprey:enabled"], "true", "false"), fields["osprey:policy"]
        initial = fields["osprey:initial-priority"]
    else
        enabled, policy = truth(fields["OSPREY_ENABLED"], "1", "0"), fields["OSPREY_PRIORITY_POLICY"]
        initial = fields["OSPREY_INITIAL_PRIORITY"]
    end
    if enabled ~= true or not policy_name(policy) then
        return nil
    end
    local number = initial ~= nil and string.match(initial, "^%+?(%d%d?%d?)$") and tonumber(initial)
    if number and OSPREY_PRIORITY[number] ~= nil then
        return number
    end
    return OSPREY_DEFAULT
end

function slurm_job_submit(job_desc, part_list, submit_uid)
    if job_desc.priority ~= nil and job_desc.priority ~= slurm.NO_VAL then
        return slurm.SUCCESS -- held (0) or set by an operator: not Osprey's to change
    end
    local start = osprey_start_priority(job_desc.comment)
    if start ~= nil then
        job_desc.priority = OSPREY_PRIORITY[start]
        slurm.log_debug("osprey: job %s starts at priority %d (Osprey %d)",
                        tostring(job_desc.name), OSPREY_PRIORITY[start], start)
    end
    return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
    return slurm.SUCCESS
end

return slurm.SUCCESS
