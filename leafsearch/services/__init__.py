"""The node's shared services, handed by the node to the layers below it: circuit breakers, the
process's memory, idle CPU and the task registry. None of them knows the Node."""
