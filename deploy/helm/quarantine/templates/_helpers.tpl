{{/* The chart's name. */}}
{{- define "quarantine.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's full name: objects are named after it. */}}
{{- define "quarantine.fullname" -}}
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

{{- define "quarantine.baseLabels" -}}
app.kubernetes.io/name: {{ include "quarantine.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The serving pods (the migrate Job's pods are component "migrate"). */}}
{{- define "quarantine.selectorLabels" -}}
{{ include "quarantine.baseLabels" . }}
app.kubernetes.io/component: server
{{- end }}

{{- define "quarantine.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "quarantine.baseLabels" . }}
app.kubernetes.io/version: {{ include "quarantine.tag" . | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "quarantine.tag" -}}
{{- default .Chart.AppVersion .Values.image.tag }}
{{- end }}

{{- define "quarantine.image" -}}
{{- printf "%s:%s" .Values.image.repository (include "quarantine.tag" .) }}
{{- end }}

{{- define "quarantine.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "quarantine.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* "true" when the service runs on PostgreSQL, "" on the embedded SQLite. */}}
{{- define "quarantine.postgres" -}}
{{- if or .Values.database.url .Values.database.existingSecret }}true{{ end }}
{{- end }}

{{/* The Secret holding the runtime database URL and the OIDC client secret. */}}
{{- define "quarantine.secretName" -}}
{{- default (include "quarantine.fullname" .) .Values.database.existingSecret }}
{{- end }}

{{- define "quarantine.oidcSecretName" -}}
{{- default (include "quarantine.fullname" .) .Values.oidc.existingSecret }}
{{- end }}

{{- define "quarantine.oidc" -}}
{{- if or .Values.oidc.clientSecret .Values.oidc.existingSecret }}true{{ end }}
{{- end }}

{{/* The chart makes a Secret of its own when a value needs one. */}}
{{- define "quarantine.ownSecret" -}}
{{- if or (and .Values.database.url (not .Values.database.existingSecret)) (and .Values.oidc.clientSecret (not .Values.oidc.existingSecret)) }}true{{ end }}
{{- end }}

{{- define "quarantine.configDir" -}}/etc/quarantine/config{{- end }}
{{- define "quarantine.oidcSecretFile" -}}/etc/quarantine/secrets/oidc-client-secret{{- end }}

{{/*
quarantine.yaml: .Values.config, plus auth.oidc.client_secret_file when
the chart mounts the OIDC client secret.
*/}}
{{- define "quarantine.config" -}}
{{- $config := deepCopy (default (dict) .Values.config) }}
{{- if hasKey $config "listen" }}
{{- fail "config.listen: leave it out; the chart sets QUARANTINE_LISTEN (the container listens on 0.0.0.0:8080)" }}
{{- end }}
{{- if hasKey $config "database" }}
{{- fail "config.database: leave it out; give database.url or database.existingSecret (kept in a Secret)" }}
{{- end }}
{{- if include "quarantine.oidc" . }}
{{- $auth := default (dict) (get $config "auth") }}
{{- $oidc := default (dict) (get $auth "oidc") }}
{{- if not (get $oidc "issuer") }}
{{- fail "oidc.clientSecret or oidc.existingSecret is set but config.auth.oidc.issuer is not" }}
{{- end }}
{{- $_ := set $oidc "client_secret_file" (include "quarantine.oidcSecretFile" .) }}
{{- $_ := set $auth "oidc" $oidc }}
{{- $_ := set $config "auth" $auth }}
{{- end }}
{{- toYaml $config }}
{{- end }}

{{/* The pod's security context and the container's, shared by the Deployment and the migrate Job. */}}
{{- define "quarantine.podSecurityContext" -}}
{{- toYaml .Values.podSecurityContext }}
{{- end }}

{{- define "quarantine.checks" -}}
{{- if and (not (include "quarantine.postgres" .)) (gt (int .Values.replicaCount) 1) }}
{{- fail "replicaCount > 1 needs PostgreSQL (database.url or database.existingSecret): the embedded SQLite serves one instance" }}
{{- end }}
{{- if and .Values.database.existingSecret (or .Values.database.url .Values.database.ownerUrl) }}
{{- fail "database.existingSecret and database.url/ownerUrl exclude each other" }}
{{- end }}
{{- if and .Values.oidc.existingSecret .Values.oidc.clientSecret }}
{{- fail "oidc.existingSecret and oidc.clientSecret exclude each other" }}
{{- end }}
{{- if not (has .Values.workload.kind (list "Deployment" "StatefulSet")) }}
{{- fail (printf "workload.kind %q: Deployment or StatefulSet" (toString .Values.workload.kind)) }}
{{- end }}
{{- include "quarantine.kafkaChecks" . }}
{{- end }}

{{/*
Kafka collectors' static group membership: every pod reads the same
ConfigMap, so an instance_id would be every replica's (static members
sharing an id fence each other); instance_id_env: POD_NAME gives each pod
its name, which only a StatefulSet keeps when the pod is replaced.
*/}}
{{- define "quarantine.kafkaChecks" -}}
{{- range $i, $c := (default (list) (get (default (dict) .Values.config) "collectors")) }}
{{- if and (kindIs "map" $c) (eq (toString (get $c "kind")) "kafka") }}
{{- if and (hasKey $c "instance_id") (gt (int $.Values.replicaCount) 1) }}
{{- fail (printf "config.collectors[%d].instance_id: the %d replicas would share it (one ConfigMap for all), and static members sharing an id fence each other: use instance_id_env: POD_NAME with workload.kind: StatefulSet" $i (int $.Values.replicaCount)) }}
{{- end }}
{{- if and (eq (toString (get $c "instance_id_env")) "POD_NAME") (ne $.Values.workload.kind "StatefulSet") }}
{{- fail (printf "config.collectors[%d].instance_id_env: POD_NAME needs workload.kind: StatefulSet (a Deployment's pod gets a new name when it is replaced, so each rollout would add static members whose partitions wait session_timeout)" $i) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
