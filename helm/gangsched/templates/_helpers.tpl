{{- define "gangsched.name" -}}{{ .Release.Name }}{{- end -}}
{{- define "gangsched.labels" -}}
app.kubernetes.io/name: gangsched
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}
{{- define "gangsched.selector" -}}
app.kubernetes.io/name: gangsched
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
