"""The names a task Lease carries (agents/kube_tasks.py writes them), apart from the queue
itself so the operator's pure planning (operator waves.py) reads them without importing a
Kubernetes client."""

TASK_LABEL = "xlasentinel.dev/agent-task"
ROLE_LABEL = "xlasentinel.dev/agent-role"
KEY_ANNOTATION = "xlasentinel.dev/task-key"
PAYLOAD_ANNOTATION = "xlasentinel.dev/task-payload"
STATE_ANNOTATION = "xlasentinel.dev/task-state"
RESULT_ANNOTATION = "xlasentinel.dev/task-result"
SPENT_ANNOTATION = "xlasentinel.dev/task-spent"  # spend.Spend of every attempt, summed
