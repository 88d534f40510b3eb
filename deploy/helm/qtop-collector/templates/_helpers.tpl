{{- define "qtop.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "qtop.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "qtop.selector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "qtop.tokenSecret" -}}
{{- default (printf "%s-tokens" (include "qtop.fullname" .)) .Values.tokens.existingSecret -}}
{{- end -}}

{{- define "qtop.tlsSecret" -}}
{{- default (printf "%s-tls" (include "qtop.fullname" .)) .Values.tls.existingSecret -}}
{{- end -}}

{{- define "qtop.scheme" -}}
{{- if .Values.insecure }}HTTP{{ else }}HTTPS{{ end -}}
{{- end -}}

{{- /* The headless Service that governs the StatefulSet: its pods'
names (NAME-0.PODS.NAMESPACE.svc) resolve through it. */}}
{{- define "qtop.podsService" -}}
{{- printf "%s-pods" (include "qtop.fullname" . | trunc 58 | trimSuffix "-") -}}
{{- end -}}

{{- /* Every replica's base URL, the peers each replica is given (one list
for all: a collector knows itself in it). */}}
{{- define "qtop.peers" -}}
{{- $full := include "qtop.fullname" . }}
{{- $pods := include "qtop.podsService" . }}
{{- $scheme := ternary "http" "https" .Values.insecure }}
{{- $urls := list }}
{{- range $i := until (int .Values.replicas) }}
{{- $urls = append $urls (printf "%s://%s-%d.%s.%s.svc:7070" $scheme $full $i $pods $.Release.Namespace) }}
{{- end }}
{{- join "," $urls -}}
{{- end -}}
