"""The node's shared services, handed by the node to the layers below it: circuit breakers, the
process's memory, idle CPU, the task registry and the slow logs. None of them knows the Node."""
