"""Tools for setting a deployment up: which mode to choose, and the containers that run it.

:mod:`.advise` measures this machine and recommends a mode; :mod:`.compose` and :mod:`.k8s` write
a docker compose file and Kubernetes manifests from the deployment plan, over the split into
learner and robot containers they share (:mod:`.containers`) and the Kubernetes objects
(:mod:`.k8s_objects`). docs/tools.md, docs/kubernetes.md.
"""
