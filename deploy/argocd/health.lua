-- Argo CD health check for xlasentinel.dev/FuzzCampaign.
-- Reads the kstatus-style conditions the operator writes (Ready, Reconciling, Stalled) and
-- trusts them only once the operator has observed the current generation, so a spec edit
-- is Progressing until the operator has acted on it. Finding bugs is the campaign's job:
-- a campaign with signatures is still Healthy. Waiting in a Kueue queue is Suspended.
local hs = {}

local function condition(status, kind)
  if status.conditions == nil then
    return nil
  end
  for _, c in ipairs(status.conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

local function message_of(c, fallback)
  if c ~= nil and c.message ~= nil and c.message ~= "" then
    return c.message
  end
  return fallback
end

local status = obj.status
if status == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to pick up the campaign"
  return hs
end

local generation = obj.metadata ~= nil and obj.metadata.generation or nil
if generation ~= nil and status.observedGeneration ~= nil and status.observedGeneration < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to observe generation " .. tostring(generation)
  return hs
end

local stalled = condition(status, "Stalled")
if (stalled ~= nil and stalled.status == "True") or status.phase == "Stalled" then
  hs.status = "Degraded"
  hs.message = message_of(stalled, "Campaign is stalled")
  return hs
end

if status.phase == "Suspended" or (obj.spec ~= nil and obj.spec.suspend == true) then
  hs.status = "Suspended"
  hs.message = "Campaign is suspended (spec.suspend)"
  return hs
end

local reconciling = condition(status, "Reconciling")
if reconciling ~= nil and reconciling.status == "True" then
  hs.status = "Progressing"
  hs.message = message_of(reconciling, "Reconciling")
  return hs
end

local ready = condition(status, "Ready")
-- Waiting for Kueue to admit the workers (spec.queueName): a steady state that lasts as long
-- as the quota is taken, not a rollout, so the app does not stay Progressing on it.
if ready ~= nil and ready.status == "False" and ready.reason == "Queued" then
  hs.status = "Suspended"
  hs.message = message_of(ready, "Waiting for Kueue to admit the workers")
  return hs
end

if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = message_of(ready, "Campaign is " .. tostring(status.phase or "ready"))
  return hs
end

if ready == nil and status.phase == "Completed" then
  hs.status = "Healthy"
  hs.message = "Campaign completed"
  return hs
end

hs.status = "Progressing"
hs.message = message_of(ready, "Campaign is " .. tostring(status.phase or "starting"))
return hs
