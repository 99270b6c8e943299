{{/*
The serving pods' template, shared by the Deployment and the StatefulSet
(workload.kind).
*/}}
{{- define "quarantine.podTemplate" -}}
metadata:
  labels:
    {{- include "quarantine.selectorLabels" . | nindent 4 }}
    {{- with .Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    checksum/config: {{ include "quarantine.config" . | sha256sum }}
    {{- with .Values.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  serviceAccountName: {{ include "quarantine.serviceAccountName" . }}
  automountServiceAccountToken: false
  # No Service links: Kubernetes would set QUARANTINE_PORT, QUARANTINE_SERVICE_HOST…
  # for a Service named quarantine, in the namespace of the service's own variables.
  enableServiceLinks: false
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- toYaml .Values.podSecurityContext | nindent 4 }}
  # serve stops on SIGTERM: it finishes the batches it holds first.
  terminationGracePeriodSeconds: 30
  containers:
    - name: quarantine
      image: {{ include "quarantine.image" . }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      args: ["serve"]
      env:
        - name: QUARANTINE_CONFIG
          value: {{ include "quarantine.configDir" . }}/quarantine.yaml
        - name: QUARANTINE_LISTEN
          value: "0.0.0.0:8080"
        # The pod's name, for a Kafka collector's instance_id_env (static
        # group membership): a StatefulSet's pods keep theirs.
        - name: POD_NAME
          valueFrom:
            fieldRef:
              fieldPath: metadata.name
        {{- if include "quarantine.postgres" . }}
        - name: QUARANTINE_DATABASE_URL
          valueFrom:
            secretKeyRef:
              name: {{ include "quarantine.secretName" . }}
              key: {{ .Values.database.urlKey }}
        {{- end }}
        {{- with .Values.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      ports:
        - name: http
          containerPort: 8080
          protocol: TCP
      startupProbe:
        httpGet:
          path: /healthz
          port: http
        {{- toYaml .Values.probes.startup | nindent 8 }}
      readinessProbe:
        httpGet:
          path: /readyz
          port: http
        {{- toYaml .Values.probes.readiness | nindent 8 }}
      livenessProbe:
        httpGet:
          path: /healthz
          port: http
        {{- toYaml .Values.probes.liveness | nindent 8 }}
      securityContext:
        {{- toYaml .Values.securityContext | nindent 8 }}
      resources:
        {{- toYaml .Values.resources | nindent 8 }}
      volumeMounts:
        - name: config
          mountPath: {{ include "quarantine.configDir" . }}
          readOnly: true
        {{- if include "quarantine.oidc" . }}
        - name: oidc
          mountPath: {{ include "quarantine.oidcSecretFile" . | dir }}
          readOnly: true
        {{- end }}
        - name: data
          mountPath: /data
        - name: tmp
          mountPath: /tmp
        {{- with .Values.extraVolumeMounts }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
  volumes:
    - name: config
      configMap:
        name: {{ include "quarantine.fullname" . }}
    {{- if include "quarantine.oidc" . }}
    - name: oidc
      secret:
        secretName: {{ include "quarantine.oidcSecretName" . }}
        items:
          - key: {{ .Values.oidc.clientSecretKey }}
            path: {{ include "quarantine.oidcSecretFile" . | base }}
    {{- end }}
    - name: data
      {{- if and (not (include "quarantine.postgres" .)) .Values.persistence.enabled }}
      persistentVolumeClaim:
        claimName: {{ default (printf "%s-data" (include "quarantine.fullname" .)) .Values.persistence.existingClaim }}
      {{- else }}
      emptyDir: {}
      {{- end }}
    - name: tmp
      emptyDir: {}
    {{- with .Values.extraVolumes }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with .Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.topologySpreadConstraints }}
  topologySpreadConstraints:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
