"""The constructs the stacks compose: each a logical unit with keyword-only properties, tested in a
throwaway stack. Data (the endpoint table, the evidence bucket, keys, retained names), the Regional
pieces (the network, the EKS cluster, the front door and its load balancer, the reconciler and its
stream lookup, the cluster's access entries, add-ons, operators, model access and managed node
groups) and the runner's workflow and clean-up; `iam` gives each its role with one customer-managed
policy. None of them is a stack.
"""
