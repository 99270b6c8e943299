package helm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/quarantine-dev/quarantine/internal/testbin"
	"github.com/quarantine-dev/quarantine/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Remove()
	os.Exit(code)
}

const (
	chart   = "quarantine"
	release = "qa"
	ns      = "ops"
	full    = "qa-quarantine" // the release's full name
)

// rendered holds the objects of one `helm template`, decoded strictly:
// kind and name to object.
type rendered map[string]any

func key(kind, name string) string { return kind + "/" + name }

// get returns the object of kind and name, failing the test when the
// chart did not render it.
func get[T any](t *testing.T, r rendered, kind, name string) *T {
	t.Helper()
	o, ok := r[key(kind, name)]
	if !ok {
		t.Fatalf("no %s %s among %v", kind, name, r.names())
	}
	v, ok := o.(*T)
	if !ok {
		t.Fatalf("%s %s is a %T", kind, name, o)
	}
	return v
}

func (r rendered) names() []string {
	var n []string
	for k := range r {
		n = append(n, k)
	}
	slices.Sort(n)
	return n
}

// newObject returns the Go type of an apiVersion and kind the chart may
// render; anything else fails the test.
func newObject(apiVersion, kind string) (any, bool) {
	switch apiVersion + " " + kind {
	case "v1 ConfigMap":
		return &corev1.ConfigMap{}, true
	case "v1 Secret":
		return &corev1.Secret{}, true
	case "v1 Service":
		return &corev1.Service{}, true
	case "v1 ServiceAccount":
		return &corev1.ServiceAccount{}, true
	case "v1 PersistentVolumeClaim":
		return &corev1.PersistentVolumeClaim{}, true
	case "apps/v1 Deployment":
		return &appsv1.Deployment{}, true
	case "apps/v1 StatefulSet":
		return &appsv1.StatefulSet{}, true
	case "batch/v1 Job":
		return &batchv1.Job{}, true
	case "policy/v1 PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, true
	case "networking.k8s.io/v1 Ingress":
		return &networkingv1.Ingress{}, true
	case "monitoring.coreos.com/v1 ServiceMonitor":
		return &monitoringv1.ServiceMonitor{}, true
	}
	return nil, false
}

// helm runs the helm binary of scripts/services.d/helm.sh.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin := testenv.Require(t, testenv.Helm, "helm")
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %v\n%s%s", strings.Join(args, " "), err, stderr.String(), stdout.String())
	}
	return stdout.String(), nil
}

// render lints the chart with the values files (strictly), renders it,
// and decodes every object strictly (an unknown or duplicate field fails
// the test).
func render(t *testing.T, valuesFiles ...string) rendered {
	t.Helper()
	var vf []string
	for _, f := range valuesFiles {
		vf = append(vf, "-f", "testdata/"+f)
	}
	if out, err := helm(t, append([]string{"lint", "--strict", chart}, vf...)...); err != nil {
		t.Fatal(err)
	} else if !strings.Contains(out, "0 chart(s) failed") {
		t.Fatalf("helm lint: %s", out)
	}
	out, err := helm(t, append([]string{"template", release, chart, "--namespace", ns}, vf...)...)
	if err != nil {
		t.Fatal(err)
	}
	r := rendered{}
	yr := k8syaml.NewYAMLReader(bufio.NewReader(strings.NewReader(out)))
	for {
		doc, err := yr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		if meta.Kind == "" {
			continue // a document of comments only
		}
		obj, ok := newObject(meta.APIVersion, meta.Kind)
		if !ok {
			t.Fatalf("the chart renders %s %s, which this test does not know", meta.APIVersion, meta.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			t.Fatalf("%s %s does not decode strictly: %v\n%s", meta.Kind, meta.Metadata.Name, err, doc)
		}
		k := key(meta.Kind, meta.Metadata.Name)
		if _, dup := r[k]; dup {
			t.Fatalf("the chart renders %s twice", k)
		}
		r[k] = obj
	}
	return r
}

func checkKinds(t *testing.T, r rendered, want ...string) {
	t.Helper()
	slices.Sort(want)
	if got := r.names(); !slices.Equal(got, want) {
		t.Errorf("rendered %v\nwant     %v", got, want)
	}
}

// checkServer checks what every serving pod must have, whatever the
// values: probes on /readyz and /healthz, a non-root user, a read-only
// root filesystem, no privilege escalation, no capabilities, no API
// token, resources, the listen address, writable /data and /tmp, no
// mount inside another, and the Service and PodDisruptionBudget
// selecting these pods.
func checkServer(t *testing.T, r rendered, d *appsv1.Deployment) {
	t.Helper()
	checkPods(t, r, "Deployment", d.Spec.Template, d.Spec.Selector)
}

// checkPods is checkServer for the pods of any workload (kind names it).
func checkPods(t *testing.T, r rendered, kind string, pod corev1.PodTemplateSpec, selector *metav1.LabelSelector) {
	t.Helper()
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	probe := func(name string, p *corev1.Probe, path string) {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || p.HTTPGet.Port.String() != "http" {
			t.Errorf("%s probe = %+v, want GET %s on port http", name, p, path)
		}
	}
	probe("readiness", c.ReadinessProbe, "/readyz")
	probe("liveness", c.LivenessProbe, "/healthz")
	probe("startup", c.StartupProbe, "/healthz")
	if len(c.Ports) != 1 || c.Ports[0].Name != "http" || c.Ports[0].ContainerPort != 8080 {
		t.Errorf("ports = %+v, want http 8080", c.Ports)
	}
	checkSecurity(t, pod.Spec, c)
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources = %+v, want CPU and memory requests and a memory limit", c.Resources)
	}
	if v := env(c, "QUARANTINE_LISTEN"); v == nil || v.Value != "0.0.0.0:8080" {
		t.Errorf("QUARANTINE_LISTEN = %+v, want 0.0.0.0:8080", v)
	}
	if v := env(c, "QUARANTINE_CONFIG"); v == nil || v.Value != "/etc/quarantine/config/quarantine.yaml" {
		t.Errorf("QUARANTINE_CONFIG = %+v", v)
	}
	for _, path := range []string{"/data", "/tmp", "/etc/quarantine/config"} {
		if m := mount(c, path); m == nil || (path == "/etc/quarantine/config") != m.ReadOnly {
			t.Errorf("mount %s = %+v", path, m)
		}
	}
	checkMounts(t, pod.Spec, c)
	if cm := volume(pod.Spec, "config"); cm == nil || cm.ConfigMap == nil || cm.ConfigMap.Name != full {
		t.Errorf("the config volume is %+v, want ConfigMap %s", cm, full)
	}
	if pod.Annotations["checksum/config"] == "" {
		t.Error("no checksum/config annotation: a config change would not roll the pods")
	}

	if v := env(c, "POD_NAME"); v == nil || v.ValueFrom == nil || v.ValueFrom.FieldRef == nil || v.ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("POD_NAME = %+v, want the pod's metadata.name (for a Kafka collector's instance_id_env)", v)
	}

	sel, err := metav1LabelSelector(selector.MatchLabels)
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Matches(labels.Set(pod.Labels)) {
		t.Errorf("the %s's selector %v does not match its pods %v", kind, sel, pod.Labels)
	}
	svc := get[corev1.Service](t, r, "Service", full)
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels)) {
		t.Errorf("the Service selects %v, not the pods %v", svc.Spec.Selector, pod.Labels)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.String() != "http" {
		t.Errorf("Service ports = %+v, want one to port http", svc.Spec.Ports)
	}
	pdb := get[policyv1.PodDisruptionBudget](t, r, "PodDisruptionBudget", full)
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("PodDisruptionBudget maxUnavailable = %v, want 1", pdb.Spec.MaxUnavailable)
	}
	if psel, _ := metav1LabelSelector(pdb.Spec.Selector.MatchLabels); !psel.Matches(labels.Set(pod.Labels)) {
		t.Errorf("the PodDisruptionBudget selects %v, not the pods %v", pdb.Spec.Selector, pod.Labels)
	}
}

// checkSecurity: the pod and its container run as the image's non-root
// user with nothing more than they need.
func checkSecurity(t *testing.T, spec corev1.PodSpec, c corev1.Container) {
	t.Helper()
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532 ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext = %+v, want runAsNonRoot, runAsUser 65532, seccomp RuntimeDefault", psc)
	}
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
		t.Errorf("container securityContext = %+v, want a read-only root, no privilege escalation, every capability dropped", sc)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("the pod mounts a Kubernetes API token it does not need")
	}
	if spec.EnableServiceLinks == nil || *spec.EnableServiceLinks {
		t.Error("the pod gets Service links: a Service named quarantine would set QUARANTINE_* variables")
	}
}

// checkMounts: every mount names a volume of the pod, and none lies
// inside another (a path inside a ConfigMap or Secret volume cannot be
// created: those are read-only).
func checkMounts(t *testing.T, spec corev1.PodSpec, c corev1.Container) {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if volume(spec, m.Name) == nil {
			t.Errorf("mount %s names no volume", m.Name)
		}
		for _, o := range c.VolumeMounts {
			if o.MountPath != m.MountPath && strings.HasPrefix(m.MountPath, strings.TrimSuffix(o.MountPath, "/")+"/") {
				t.Errorf("mount %s lies inside mount %s", m.MountPath, o.MountPath)
			}
		}
	}
}

func metav1LabelSelector(m map[string]string) (labels.Selector, error) {
	if len(m) == 0 {
		return nil, errors.New("an empty selector selects everything")
	}
	return labels.SelectorFromSet(m), nil
}

func env(c corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

func mount(c corev1.Container, path string) *corev1.VolumeMount {
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].MountPath == path {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

func volume(spec corev1.PodSpec, name string) *corev1.Volume {
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == name {
			return &spec.Volumes[i]
		}
	}
	return nil
}

// config decodes the quarantine.yaml of a ConfigMap.
func config(t *testing.T, cm *corev1.ConfigMap) map[string]any {
	t.Helper()
	var c map[string]any
	if err := yaml.UnmarshalStrict([]byte(cm.Data["quarantine.yaml"]), &c); err != nil {
		t.Fatalf("ConfigMap %s: quarantine.yaml: %v", cm.Name, err)
	}
	return c
}

// TestChartDefaults: with the default values the chart runs one replica
// on the embedded SQLite, kept on a PersistentVolumeClaim at /data,
// recreated rather than rolled (one pod holds the volume), with no
// Secret, no migrate Job, no Ingress and no ServiceMonitor.
func TestChartDefaults(t *testing.T) {
	t.Parallel()
	r := render(t)
	checkKinds(t, r,
		key("ServiceAccount", full), key("ConfigMap", full), key("PersistentVolumeClaim", full+"-data"),
		key("Service", full), key("Deployment", full), key("PodDisruptionBudget", full))
	d := get[appsv1.Deployment](t, r, "Deployment", full)
	checkServer(t, r, d)
	if *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("replicas %d strategy %s, want 1 Recreate", *d.Spec.Replicas, d.Spec.Strategy.Type)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if c.Image != "quarantine:latest" || !slices.Equal(c.Args, []string{"serve"}) {
		t.Errorf("image %s args %q, want quarantine:latest serve", c.Image, c.Args)
	}
	if v := env(c, "QUARANTINE_DATABASE_URL"); v != nil {
		t.Errorf("QUARANTINE_DATABASE_URL = %+v, want the image's SQLite default", v)
	}
	if v := volume(d.Spec.Template.Spec, "data"); v == nil || v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != full+"-data" {
		t.Errorf("the data volume is %+v, want the claim %s-data", v, full)
	}
	cfg := config(t, get[corev1.ConfigMap](t, r, "ConfigMap", full))
	if _, ok := cfg["database"]; ok {
		t.Errorf("the config sets database: %v", cfg)
	}
}

// TestChartEverything: every optional part enabled, on PostgreSQL with a
// runtime and an owner role. The migrate Job is a pre-install and
// pre-upgrade hook running `quarantine migrate` with the owner's URL from
// a hook Secret created before it and deleted after it succeeds; the
// release's own Secret never holds the owner's URL; the serving pods read
// the runtime URL; the OIDC client secret is a mounted file the config
// points at; the Job's pods are not selected by the Service, the
// Deployment or the PodDisruptionBudget.
func TestChartEverything(t *testing.T) {
	t.Parallel()
	r := render(t, "all.yaml")
	migrate := full + "-migrate"
	checkKinds(t, r,
		key("ServiceAccount", full), key("ConfigMap", full), key("Secret", full),
		key("Service", full), key("Deployment", full), key("PodDisruptionBudget", full),
		key("Ingress", full), key("ServiceMonitor", full),
		key("Secret", migrate), key("ConfigMap", migrate), key("Job", migrate))

	d := get[appsv1.Deployment](t, r, "Deployment", full)
	checkServer(t, r, d)
	if *d.Spec.Replicas != 3 || d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType ||
		d.Spec.Strategy.RollingUpdate.MaxUnavailable.IntValue() != 0 {
		t.Errorf("replicas %d strategy %+v, want 3 rolling with maxUnavailable 0", *d.Spec.Replicas, d.Spec.Strategy)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if c.Image != "registry.example.com/quarantine:v1.2.3" {
		t.Errorf("image %s", c.Image)
	}
	checkSecretRef(t, env(c, "QUARANTINE_DATABASE_URL"), full, "database-url")
	if v := volume(d.Spec.Template.Spec, "data"); v == nil || v.EmptyDir == nil {
		t.Errorf("the data volume is %+v, want an emptyDir on PostgreSQL", v)
	}

	secret := get[corev1.Secret](t, r, "Secret", full)
	if got := string(secret.Data["database-url"]); !strings.Contains(got, "quarantine_app:") {
		t.Errorf("the release's Secret holds database-url %q, want the runtime role's", got)
	}
	for k, v := range secret.Data {
		if strings.Contains(string(v), "owner-secret") {
			t.Errorf("the release's Secret holds the owner's credentials under %s", k)
		}
	}
	if string(secret.Data["oidc-client-secret"]) != "oidc-secret" {
		t.Errorf("the release's Secret lacks the OIDC client secret: %v", secret.Data)
	}

	// The OIDC client secret: a file the config names.
	cfg := config(t, get[corev1.ConfigMap](t, r, "ConfigMap", full))
	oidc, _ := cfg["auth"].(map[string]any)["oidc"].(map[string]any)
	file, _ := oidc["client_secret_file"].(string)
	if file == "" || oidc["issuer"] != "https://sso.example.com" {
		t.Fatalf("config auth.oidc = %v, want the values' keys and client_secret_file", oidc)
	}
	m := mount(c, "/etc/quarantine/secrets")
	v := volume(d.Spec.Template.Spec, "oidc")
	if m == nil || m.Name != "oidc" || !m.ReadOnly || v == nil || v.Secret == nil || v.Secret.SecretName != full ||
		len(v.Secret.Items) != 1 || v.Secret.Items[0].Key != "oidc-client-secret" || "/etc/quarantine/secrets/"+v.Secret.Items[0].Path != file {
		t.Errorf("the OIDC secret is mounted as %+v from %+v, want the file %s", m, v, file)
	}

	// The migrate hook.
	job := get[batchv1.Job](t, r, "Job", migrate)
	hookSecret := get[corev1.Secret](t, r, "Secret", migrate)
	hookConfig := get[corev1.ConfigMap](t, r, "ConfigMap", migrate)
	for _, meta := range []struct {
		what        string
		annotations map[string]string
		weight      string
	}{
		{"Job", job.Annotations, "0"},
		{"Secret", hookSecret.Annotations, "-10"},
		{"ConfigMap", hookConfig.Annotations, "-10"},
	} {
		if meta.annotations["helm.sh/hook"] != "pre-install,pre-upgrade" ||
			meta.annotations["helm.sh/hook-weight"] != meta.weight ||
			meta.annotations["helm.sh/hook-delete-policy"] != "before-hook-creation,hook-succeeded" {
			t.Errorf("the migrate %s's annotations are %v, want a pre-install,pre-upgrade hook of weight %s deleted once it succeeded",
				meta.what, meta.annotations, meta.weight)
		}
	}
	if got := string(hookSecret.Data["owner-database-url"]); !strings.Contains(got, "quarantine_owner:owner-secret@") {
		t.Errorf("the migrate Secret holds %q, want the owner's URL", got)
	}
	if cfg2 := config(t, hookConfig); fmt.Sprint(cfg2) != fmt.Sprint(cfg) {
		t.Errorf("the migrate Job's config differs from the pods':\n%v\n%v", cfg2, cfg)
	}
	jc := job.Spec.Template.Spec.Containers
	if len(jc) != 1 || !slices.Equal(jc[0].Args, []string{"migrate"}) || jc[0].Image != c.Image ||
		job.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Fatalf("the Job runs %+v, want one container with args [migrate] in %s, never restarted", jc, c.Image)
	}
	checkSecretRef(t, env(jc[0], "QUARANTINE_DATABASE_URL"), migrate, "owner-database-url")
	checkSecurity(t, job.Spec.Template.Spec, jc[0])
	checkMounts(t, job.Spec.Template.Spec, jc[0])
	if v := volume(job.Spec.Template.Spec, "config"); v == nil || v.ConfigMap == nil || v.ConfigMap.Name != migrate {
		t.Errorf("the Job's config volume is %+v, want the hook ConfigMap (the release's does not exist yet at pre-install)", v)
	}
	if job.Spec.Template.Spec.ServiceAccountName != "" {
		t.Errorf("the Job uses the service account %s, which the chart creates only after the hooks", job.Spec.Template.Spec.ServiceAccountName)
	}
	jobPods := labels.Set(job.Spec.Template.Labels)
	svc := get[corev1.Service](t, r, "Service", full)
	pdb := get[policyv1.PodDisruptionBudget](t, r, "PodDisruptionBudget", full)
	for what, sel := range map[string]map[string]string{
		"Service": svc.Spec.Selector, "Deployment": d.Spec.Selector.MatchLabels, "PodDisruptionBudget": pdb.Spec.Selector.MatchLabels,
	} {
		if labels.SelectorFromSet(sel).Matches(jobPods) {
			t.Errorf("the %s selects the migrate Job's pods (%v)", what, jobPods)
		}
	}

	// Ingress and ServiceMonitor.
	ing := get[networkingv1.Ingress](t, r, "Ingress", full)
	if ing.Spec.IngressClassName == nil || *ing.Spec.IngressClassName != "nginx" || len(ing.Spec.TLS) != 1 ||
		len(ing.Spec.Rules) != 1 || ing.Spec.Rules[0].Host != "quarantine.example.com" ||
		ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name != full || ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Port.Name != "http" {
		t.Errorf("Ingress spec = %+v", ing.Spec)
	}
	sm := get[monitoringv1.ServiceMonitor](t, r, "ServiceMonitor", full)
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "http" || sm.Spec.Endpoints[0].Path != "/metrics" ||
		sm.Labels["release"] != "prometheus" || !labels.SelectorFromSet(sm.Spec.Selector.MatchLabels).Matches(labels.Set(svc.Labels)) {
		t.Errorf("ServiceMonitor = %+v, want /metrics on port http of the Service", sm)
	}
	if a := sm.Spec.Endpoints[0].Authorization; a == nil || a.Credentials == nil || a.Credentials.Name != "quarantine-metrics" || a.Credentials.Key != "token" {
		t.Errorf("ServiceMonitor authorization = %+v", a)
	}
}

// TestChartStatefulSet: workload.kind StatefulSet runs the pods under
// names they keep (qa-quarantine-0, -1, -2), governed by a headless
// Service the ServiceMonitor does not scrape; each pod has its name in
// POD_NAME, and the Kafka collectors of the one ConfigMap name it with
// instance_id_env (one static group member per pod, the same after a
// restart), which the service accepts. No Deployment is rendered.
func TestChartStatefulSet(t *testing.T) {
	t.Parallel()
	r := render(t, "statefulset.yaml")
	headless := full + "-headless"
	checkKinds(t, r,
		key("ServiceAccount", full), key("ConfigMap", full), key("Secret", full),
		key("Service", full), key("Service", headless), key("StatefulSet", full), key("PodDisruptionBudget", full),
		key("ServiceMonitor", full), key("Secret", full+"-migrate"), key("ConfigMap", full+"-migrate"), key("Job", full+"-migrate"))
	s := get[appsv1.StatefulSet](t, r, "StatefulSet", full)
	checkPods(t, r, "StatefulSet", s.Spec.Template, s.Spec.Selector)
	if *s.Spec.Replicas != 3 || s.Spec.PodManagementPolicy != appsv1.ParallelPodManagement ||
		s.Spec.UpdateStrategy.Type != appsv1.RollingUpdateStatefulSetStrategyType || len(s.Spec.VolumeClaimTemplates) != 0 {
		t.Errorf("StatefulSet spec: replicas %d, pod management %s, update %s, %d claim templates; want 3, Parallel, RollingUpdate, none",
			*s.Spec.Replicas, s.Spec.PodManagementPolicy, s.Spec.UpdateStrategy.Type, len(s.Spec.VolumeClaimTemplates))
	}
	if v := volume(s.Spec.Template.Spec, "data"); v == nil || v.EmptyDir == nil {
		t.Errorf("the data volume is %+v, want an emptyDir on PostgreSQL", v)
	}
	hs := get[corev1.Service](t, r, "Service", headless)
	if s.Spec.ServiceName != headless || hs.Spec.ClusterIP != corev1.ClusterIPNone ||
		!labels.SelectorFromSet(hs.Spec.Selector).Matches(labels.Set(s.Spec.Template.Labels)) {
		t.Errorf("serviceName %q; Service %s: clusterIP %q, selector %v; want the headless Service selecting the pods %v",
			s.Spec.ServiceName, headless, hs.Spec.ClusterIP, hs.Spec.Selector, s.Spec.Template.Labels)
	}
	sm := get[monitoringv1.ServiceMonitor](t, r, "ServiceMonitor", full)
	if labels.SelectorFromSet(sm.Spec.Selector.MatchLabels).Matches(labels.Set(hs.Labels)) {
		t.Errorf("the ServiceMonitor selects the headless Service too (%v): every pod would be scraped twice", hs.Labels)
	}

	cm := get[corev1.ConfigMap](t, r, "ConfigMap", full)
	var kafka int
	for _, c := range config(t, cm)["collectors"].([]any) {
		c := c.(map[string]any)
		if c["kind"] != "kafka" {
			continue
		}
		kafka++
		if _, ok := c["instance_id"]; ok || c["instance_id_env"] != "POD_NAME" {
			t.Errorf("collector %v: want instance_id_env POD_NAME and no instance_id", c)
		}
	}
	if kafka == 0 {
		t.Fatal("no Kafka collector in the rendered config")
	}
	// The service accepts the config (a collector's keys are checked as
	// it loads; serve reads POD_NAME as the collector starts, tested in
	// broker/kafka TestStaticMemberRestartAfterKill).
	dir := t.TempDir()
	file := filepath.Join(dir, "quarantine.yaml")
	if err := os.WriteFile(file, []byte(cm.Data["quarantine.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testbin.Path(t), "migrate", "--config", file, "--database", "sqlite:"+filepath.Join(dir, "q.db"))
	cmd.Env = append(os.Environ(), "QUARANTINE_DATABASE_URL=", "QUARANTINE_LISTEN=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("quarantine migrate with the StatefulSet's config: %v\n%s", err, out)
	}
}

// TestChartExistingSecrets: with Secrets made outside the chart, the
// chart makes none, and the pods and the migrate Job read the keys named
// in the values.
func TestChartExistingSecrets(t *testing.T) {
	t.Parallel()
	r := render(t, "existing-secret.yaml")
	migrate := full + "-migrate"
	checkKinds(t, r,
		key("ServiceAccount", full), key("ConfigMap", full),
		key("Service", full), key("Deployment", full), key("PodDisruptionBudget", full),
		key("ConfigMap", migrate), key("Job", migrate))
	d := get[appsv1.Deployment](t, r, "Deployment", full)
	checkServer(t, r, d)
	checkSecretRef(t, env(d.Spec.Template.Spec.Containers[0], "QUARANTINE_DATABASE_URL"), "quarantine-db", "app-url")
	job := get[batchv1.Job](t, r, "Job", migrate)
	checkSecretRef(t, env(job.Spec.Template.Spec.Containers[0], "QUARANTINE_DATABASE_URL"), "quarantine-db", "owner-url")
	if v := volume(d.Spec.Template.Spec, "oidc"); v == nil || v.Secret == nil || v.Secret.SecretName != "quarantine-oidc" || v.Secret.Items[0].Key != "secret" {
		t.Errorf("the OIDC volume is %+v, want key secret of Secret quarantine-oidc", v)
	}
}

// TestChartRefuses: values that cannot work stop `helm template` with a
// message naming the value.
func TestChartRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		set  []string
		want string
	}{
		{"replicas on SQLite", []string{"replicaCount=2"}, "replicaCount > 1 needs PostgreSQL"},
		{"listen in config", []string{"config.listen=0.0.0.0:9090"}, "config.listen"},
		{"database in config", []string{"config.database=sqlite:/data/x.db"}, "config.database"},
		{"OIDC secret without issuer", []string{"oidc.clientSecret=x"}, "config.auth.oidc.issuer"},
		{"both database sources", []string{"database.url=postgres://a@b/c", "database.existingSecret=s"}, "exclude each other"},
		{"unknown workload", []string{"workload.kind=DaemonSet"}, "workload.kind \"DaemonSet\""},
		{"Kafka instance_id shared by replicas", []string{"database.url=postgres://a@b/c", "replicaCount=2", "workload.kind=StatefulSet",
			"config.collectors[0].name=k", "config.collectors[0].kind=kafka", "config.collectors[0].instance_id=serve-1"},
			"config.collectors[0].instance_id: the 2 replicas would share it"},
		{"Kafka POD_NAME in a Deployment", []string{"config.collectors[0].name=k", "config.collectors[0].kind=kafka",
			"config.collectors[0].instance_id_env=POD_NAME"}, "instance_id_env: POD_NAME needs workload.kind: StatefulSet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"template", release, chart}
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			_, err := helm(t, args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("helm template with %v: %v, want an error containing %q", tc.set, err, tc.want)
			}
		})
	}
}

func checkSecretRef(t *testing.T, v *corev1.EnvVar, secret, key string) {
	t.Helper()
	if v == nil || v.ValueFrom == nil || v.ValueFrom.SecretKeyRef == nil ||
		v.ValueFrom.SecretKeyRef.Name != secret || v.ValueFrom.SecretKeyRef.Key != key || v.Value != "" {
		t.Errorf("%+v, want the value of key %s of Secret %s", v, key, secret)
	}
}

// TestChartDefaultConfigLoads: the quarantine.yaml the chart renders by
// default is a configuration the service accepts (unknown keys are an
// error there): `quarantine migrate` with it succeeds on a scratch
// SQLite.
func TestChartDefaultConfigLoads(t *testing.T) {
	t.Parallel()
	r := render(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "quarantine.yaml")
	if err := os.WriteFile(file, []byte(get[corev1.ConfigMap](t, r, "ConfigMap", full).Data["quarantine.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testbin.Path(t), "migrate", "--config", file, "--database", "sqlite:"+filepath.Join(dir, "q.db"))
	cmd.Env = append(os.Environ(), "QUARANTINE_DATABASE_URL=", "QUARANTINE_LISTEN=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("quarantine migrate with the chart's default config: %v\n%s", err, out)
	}
}
