//! Which Applications an object change can affect (pure), so a gate over a fleet re-decides
//! only those and never rescans the fleet on an event: Applications by name; workloads and
//! Services by the Applications whose `status.resources` list them; ReplicaSets and Pods by
//! owner; EndpointSlices by Service; and every object by namespace.

/// An Application, by namespace and name.
pub type AppKey = (String, String);
