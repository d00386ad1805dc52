{{/* Pieces of the NetworkPolicies (networkpolicy.yaml). */}}
{{- define "tandem.dnsEgress" -}}
{{- if .Values.networkPolicy.dns.enabled -}}
- to:
    {{- toYaml .Values.networkPolicy.dns.to | nindent 4 }}
  ports:
    {{- range .Values.networkPolicy.dns.ports }}
    - {protocol: UDP, port: {{ . }}}
    - {protocol: TCP, port: {{ . }}}
    {{- end }}
{{- end }}
{{- end }}

{{/* (dict "ctx" $ "port" PORT) */}}
{{- define "tandem.metricsIngress" -}}
{{- with .ctx.Values.networkPolicy.metricsFrom -}}
- from:
    {{- toYaml . | nindent 4 }}
  ports:
    - {protocol: TCP, port: {{ $.port }}}
{{- end }}
{{- end }}
{{- define "tandem.hubEgress" -}}
{{- if eq .Values.model.source "hub" -}}
- to:
    {{- range .Values.networkPolicy.hubCIDRs }}
    - ipBlock: {cidr: {{ . }}}
    {{- end }}
  ports:
    - {protocol: TCP, port: 443}
{{- end }}
{{- with .Values.networkPolicy.extraWorkerEgress }}
{{ toYaml . }}
{{- end }}
{{- end }}
