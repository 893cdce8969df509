"""What a deployment is and what it needs: the typed `cdk.json` config (`config`), the Kubernetes
versions EKS supports and what matches each (`kubernetes`), the Helm charts pinned with the
Kubernetes versions each documents (`charts`), what the stacks take from an account's quotas
(`capacity`), the CloudWatch dashboards (`dashboards`) and the Container Insights add-on that
publishes their GPU utilisation (`container_insights`). The stacks and `gco doctor` both read these
modules, so a check before a deploy and the deploy itself agree. Import the modules themselves; this
face names none, so importing one does not import the others."""
