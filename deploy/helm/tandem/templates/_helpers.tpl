{{/* Names. */}}
{{- define "tandem.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "tandem.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The labels every object carries. */}}
{{- define "tandem.labels" -}}
{{ include "tandem.selectorLabels" . }}
{{ include "tandem.releaseLabels" . }}
{{- end }}

{{- define "tandem.releaseLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "tandem.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tandem.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
The labels that select one role's pods: (dict "ctx" $ "role" "router|prefill|decode").
Workers also carry llm-d's labels, which the routers' discovery reads.
*/}}
{{- define "tandem.roleSelectorLabels" -}}
{{ include "tandem.selectorLabels" .ctx }}
app.kubernetes.io/component: {{ .role }}
{{- if ne .role "router" }}
llm-d.ai/role: {{ .role }}
llm-d.ai/inferenceServing: "true"
{{- end }}
{{- end }}

{{/* The labels of a role's pods: (dict "ctx" $ "role" ROLE). */}}
{{- define "tandem.podLabels" -}}
{{ include "tandem.roleSelectorLabels" . }}
{{ include "tandem.releaseLabels" .ctx }}
{{- with .ctx.Values.podLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The routers' --discovery-selector: the worker pods of this release. */}}
{{- define "tandem.discoverySelector" -}}
app.kubernetes.io/name={{ include "tandem.name" . }},app.kubernetes.io/instance={{ .Release.Name }},llm-d.ai/inferenceServing=true
{{- end }}

{{- define "tandem.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if .Values.image.digest }}
{{- printf "%s:%s@%s" .Values.image.repository $tag .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{- define "tandem.tokenSecretName" -}}
{{- default (printf "%s-cluster-token" (include "tandem.fullname" .)) .Values.clusterToken.existingSecret }}
{{- end }}

{{- define "tandem.apiKeySecretName" -}}
{{- default (printf "%s-api-key" (include "tandem.fullname" .)) .Values.router.apiKey.existingSecret }}
{{- end }}

{{- define "tandem.routerServiceAccountName" -}}
{{- default (printf "%s-router" (include "tandem.fullname" .)) .Values.router.serviceAccount.name }}
{{- end }}

{{/*
terminationGracePeriodSeconds of a role: (dict "ctx" $ "override" VALUE). Above --drain-settle + --drain-timeout, so
the kubelet's SIGKILL never cuts a drain short.
*/}}
{{- define "tandem.gracePeriod" -}}
{{- $d := .ctx.Values.drain }}
{{- $floor := add (int $d.settleSeconds) (int $d.timeoutSeconds) }}
{{- if kindIs "invalid" .override }}
{{- add $floor (int $d.marginSeconds) }}
{{- else if le (int .override) $floor }}
{{- fail (printf "terminationGracePeriodSeconds %d must be larger than drain.settleSeconds + drain.timeoutSeconds (%d)" (int .override) $floor) }}
{{- else }}
{{- int .override }}
{{- end }}
{{- end }}

{{/* The drain flags every role takes. */}}
{{- define "tandem.drainArgs" -}}
- --drain-settle={{ int .Values.drain.settleSeconds }}s
- --drain-timeout={{ int .Values.drain.timeoutSeconds }}s
{{- end }}

{{/* Checks of values that no schema says. */}}
{{- define "tandem.validate" -}}
{{- if and .Values.clusterToken.value (lt (len .Values.clusterToken.value) 16) }}
{{- fail "clusterToken.value must be at least 16 characters" }}
{{- end }}
{{- if and .Values.clusterToken.value .Values.clusterToken.existingSecret }}
{{- fail "give clusterToken.value or clusterToken.existingSecret, not both" }}
{{- end }}
{{- if and .Values.router.apiKey.value .Values.router.apiKey.existingSecret }}
{{- fail "give router.apiKey.value or router.apiKey.existingSecret, not both" }}
{{- end }}
{{- if eq .Values.model.source "hub" }}
{{- if not .Values.model.ref }}{{ fail "model.ref is required with model.source hub" }}{{ end }}
{{- else if eq .Values.model.source "path" }}
{{- if not .Values.model.path }}{{ fail "model.path is required with model.source path" }}{{ end }}
{{- if not .Values.model.volume }}{{ fail "model.volume is required with model.source path" }}{{ end }}
{{- else }}
{{- fail (printf "model.source %q is not supported: use hub or path" .Values.model.source) }}
{{- end }}
{{- if not (has .Values.logFormat (list "json" "text")) }}
{{- fail (printf "logFormat %q is not supported: use json or text" .Values.logFormat) }}
{{- end }}
{{- end }}

{{/* The pod template's annotations: the given ones and a checksum of the given secrets, so changing them rolls pods. */}}
{{- define "tandem.podAnnotations" -}}
checksum/secrets: {{ printf "%s/%s/%s" .Values.clusterToken.value .Values.clusterToken.existingSecret .Values.router.apiKey.value | sha256sum | trunc 16 }}
{{- with .Values.podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The cluster token as a mounted file (the volume; the mount is tandem.tokenMount). */}}
{{- define "tandem.tokenVolume" -}}
- name: cluster-token
  secret:
    secretName: {{ include "tandem.tokenSecretName" . }}
    defaultMode: 0440
    items:
      - key: {{ .Values.clusterToken.key }}
        path: token
{{- end }}

{{- define "tandem.tokenMount" -}}
- name: cluster-token
  mountPath: /var/run/tandem/cluster-token
  readOnly: true
{{- end }}

{{- define "tandem.tokenFileArg" -}}
- --cluster-token-file=/var/run/tandem/cluster-token/token
{{- end }}

{{/* The environment of whatever resolves a hub reference: the cache, the hub's address and token. */}}
{{- define "tandem.modelEnv" -}}
- name: TANDEM_HOME
  value: {{ .Values.model.cache.mountPath | quote }}
{{- with .Values.model.hubEndpoint }}
- name: HF_ENDPOINT
  value: {{ . | quote }}
{{- end }}
{{- with .Values.model.hubTokenSecret }}
- name: HF_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ required "model.hubTokenSecret.name is required" .name }}
      key: {{ required "model.hubTokenSecret.key is required" .key }}
{{- end }}
{{- end }}
