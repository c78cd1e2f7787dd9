"""Who may say what on the domain: the learner's signatures on weights and replay status,
the per-robot MACs on action batches, and the checks of a container's load requests.
"""
