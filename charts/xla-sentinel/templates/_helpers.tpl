{{/* Chart name, truncated to the 63 characters a label value allows. */}}
{{- define "xla-sentinel.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Prefix of every object name in the release. */}}
{{- define "xla-sentinel.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "xla-sentinel.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "xla-sentinel.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: xla-sentinel
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "xla-sentinel.selectorLabels" -}}
app.kubernetes.io/name: {{ include "xla-sentinel.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "xla-sentinel.operatorSelectorLabels" -}}
{{ include "xla-sentinel.selectorLabels" . }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "xla-sentinel.operatorServiceAccountName" -}}
{{- if .Values.serviceAccounts.operator.create }}
{{- default (printf "%s-operator" (include "xla-sentinel.fullname" .)) .Values.serviceAccounts.operator.name }}
{{- else }}
{{- default "default" .Values.serviceAccounts.operator.name }}
{{- end }}
{{- end }}

{{- define "xla-sentinel.workerServiceAccountName" -}}
{{- if .Values.serviceAccounts.worker.create }}
{{- default (printf "%s-worker" (include "xla-sentinel.fullname" .)) .Values.serviceAccounts.worker.name }}
{{- else }}
{{- default "default" .Values.serviceAccounts.worker.name }}
{{- end }}
{{- end }}

{{- define "xla-sentinel.agentServiceAccountName" -}}
{{- if .Values.serviceAccounts.agent.create }}
{{- default (printf "%s-agent" (include "xla-sentinel.fullname" .)) .Values.serviceAccounts.agent.name }}
{{- else }}
{{- default "default" .Values.serviceAccounts.agent.name }}
{{- end }}
{{- end }}

{{/* registry/repository:tag or @digest; the tag defaults to the chart's appVersion. */}}
{{- define "xla-sentinel.image" -}}
{{- $root := index . 0 }}
{{- $img := index . 1 }}
{{- $ref := printf "%s/%s" $root.Values.images.registry $img.repository }}
{{- if $img.digest }}
{{- printf "%s@%s" $ref $img.digest }}
{{- else }}
{{- printf "%s:%s" $ref (default $root.Chart.AppVersion $img.tag) }}
{{- end }}
{{- end }}

{{/* Namespaces where campaigns run: the release namespace unless told otherwise. The
operator reconciles these (all namespaces with clusterWide), and each gets the worker
identity, Roles and NetworkPolicy. */}}
{{- define "xla-sentinel.watchNamespaces" -}}
{{- if .Values.operator.watchNamespaces }}
{{- join "," .Values.operator.watchNamespaces }}
{{- else }}
{{- .Release.Namespace }}
{{- end }}
{{- end }}

{{/* Every Secret name the operator may read: alert route webhooks plus extra names. */}}
{{- define "xla-sentinel.secretNames" -}}
{{- $names := list }}
{{- range .Values.alerts.routes }}
{{- $names = append $names .webhookSecretRef.name }}
{{- end }}
{{- range .Values.alerts.extraSecretNames }}
{{- $names = append $names . }}
{{- end }}
{{- join "," (uniq $names) }}
{{- end }}

{{/* The restricted Pod Security profile, for the pod and for each container. */}}
{{- define "xla-sentinel.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "xla-sentinel.containerSecurityContext" -}}
runAsNonRoot: true
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
privileged: false
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* What the operator does in a namespace whose FuzzCampaigns it reconciles (the API
calls of operator/xla_sentinel_operator/handlers.py and kopf's own bookkeeping, which patches but never updates). */}}
{{- define "xla-sentinel.reconcileRules" -}}
- apiGroups: [xlasentinel.dev]
  resources: [fuzzcampaigns, fuzzcampaigns/status]
  verbs: [get, list, watch, patch]
# Worker Jobs name their campaign as owner with blockOwnerDeletion, which needs this.
- apiGroups: [xlasentinel.dev]
  resources: [fuzzcampaigns/finalizers]
  verbs: [update]
- apiGroups: [xlasentinel.dev]
  resources: [bugsignatures]
  verbs: [get, list, watch, create, patch]
- apiGroups: [xlasentinel.dev]
  resources: [bugsignatures/status]
  verbs: [patch]
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get, list, watch, create, patch, delete]
# Worker pods: indexed for their disruptions only (evictions, preemptions: rollup.disruptions).
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch]
# Worker reports (runners/xla_sentinel/cluster/report.py): indexed, and removed with their campaign.
- apiGroups: [xlasentinel.dev]
  resources: [workerreports]
  verbs: [get, list, watch, delete]
# Multi-host TPU slices run as JobSets (operator/xla_sentinel_operator/jobsets.py), which
# make their hosts' headless Services themselves; removed with their campaign by owner reference.
{{- if .Values.jobset.enabled }}
- apiGroups: [jobset.x-k8s.io]
  resources: [jobsets]
  verbs: [get, list, watch, create, patch, delete]
{{- end }}
- apiGroups: ["", events.k8s.io]
  resources: [events]
  verbs: [create, patch]
# The agents' task queue (one Lease per task): summed for status.agents (spending, dropped tasks).
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [list]
{{- end }}

{{/* DNS on GKE: kube-dns pods in kube-system, and the addresses of networkPolicy.dns.cidrs
(NodeLocal DNSCache's 169.254.20.10 on the node, whose pods run on the host network that a
namespaceSelector cannot match; Cloud DNS for GKE answered by the node's metadata server at
169.254.169.254), UDP and TCP 53. */}}
{{- define "xla-sentinel.dnsEgress" -}}
- to:
    - namespaceSelector:
        matchLabels:
          kubernetes.io/metadata.name: kube-system
      podSelector:
        matchLabels:
          k8s-app: kube-dns
    {{- range .Values.networkPolicy.dns.cidrs }}
    - ipBlock: {cidr: {{ . }}}
    {{- end }}
  ports:
    - {port: 53, protocol: UDP}
    - {port: 53, protocol: TCP}
{{- end }}

{{- define "xla-sentinel.apiServerEgress" -}}
- to:
    {{- range .Values.networkPolicy.apiServer.cidrs }}
    - ipBlock: {cidr: {{ . }}}
    {{- end }}
  ports:
    {{- range .Values.networkPolicy.apiServer.ports }}
    - {port: {{ . }}, protocol: TCP}
    {{- end }}
{{- end }}

{{- define "xla-sentinel.httpsEgress" -}}
- to:
    {{- range .Values.networkPolicy.webhookEgress.cidrs }}
    - ipBlock: {cidr: {{ . }}}
    {{- end }}
  ports:
    {{- range .Values.networkPolicy.webhookEgress.ports }}
    - {port: {{ . }}, protocol: TCP}
    {{- end }}
{{- end }}

{{/* The worker pods of the same namespace: a multi-host slice's hosts, any port. */}}
{{/* The pods a slice host talks to: the other hosts of its slice. Every role that runs on
a multi-host slice does (workers, and the bisector and verifier slice JobSets of a TPU
campaign: desired._followup), so each must admit its own kind, not workers only. */}}
{{- define "xla-sentinel.slicePeers" -}}
- podSelector:
    matchExpressions:
      - {key: xlasentinel.dev/campaign, operator: Exists}
      - {key: xlasentinel.dev/role, operator: In, values: [worker, bisector, verifier]}
{{- end }}

{{/* Objects whose kind comes from crds/: Argo CD's dry run must not fail on a first sync,
before the CRDs exist. Other tools ignore the annotation. */}}
{{- define "xla-sentinel.gitopsAnnotations" -}}
argocd.argoproj.io/sync-options: SkipDryRunOnMissingResource=true
{{- end }}
