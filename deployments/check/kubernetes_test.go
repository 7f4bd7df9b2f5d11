package check

import (
	"cmp"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/kustomize/api/krusty"
	kusttypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/kafkamender/kafkamender/deployments/check/generate"
	"github.com/kafkamender/kafkamender/internal/config"
)

const kubeDir = "deployments/kubernetes"

// kube is the Kubernetes deployment, every object decoded into its API type.
type kube struct {
	configMaps      []corev1.ConfigMap
	deployments     []appsv1.Deployment
	services        []corev1.Service
	pdbs            []policyv1.PodDisruptionBudget
	networkPolicies []networkingv1.NetworkPolicy
	serviceMonitors []monitoringv1.ServiceMonitor
	prometheusRules []monitoringv1.PrometheusRule
}

// decodeObject decodes one manifest strictly into the API type of its kind, and refuses
// a kind this deployment has no business with.
func (k *kube) decodeObject(t testing.TB, name string, data []byte) {
	t.Helper()
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(data, &meta); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	switch meta.APIVersion + " " + meta.Kind {
	case "v1 ConfigMap":
		var o corev1.ConfigMap
		decodeStrict(t, name, data, &o)
		k.configMaps = append(k.configMaps, o)
	case "apps/v1 Deployment":
		var o appsv1.Deployment
		decodeStrict(t, name, data, &o)
		k.deployments = append(k.deployments, o)
	case "v1 Service":
		var o corev1.Service
		decodeStrict(t, name, data, &o)
		k.services = append(k.services, o)
	case "policy/v1 PodDisruptionBudget":
		var o policyv1.PodDisruptionBudget
		decodeStrict(t, name, data, &o)
		k.pdbs = append(k.pdbs, o)
	case "networking.k8s.io/v1 NetworkPolicy":
		var o networkingv1.NetworkPolicy
		decodeStrict(t, name, data, &o)
		k.networkPolicies = append(k.networkPolicies, o)
	case "monitoring.coreos.com/v1 ServiceMonitor":
		var o monitoringv1.ServiceMonitor
		decodeStrict(t, name, data, &o)
		k.serviceMonitors = append(k.serviceMonitors, o)
	case "monitoring.coreos.com/v1 PrometheusRule":
		var o monitoringv1.PrometheusRule
		decodeStrict(t, name, data, &o)
		k.prometheusRules = append(k.prometheusRules, o)
	default:
		t.Fatalf("%s: unexpected object %s %s", name, meta.APIVersion, meta.Kind)
	}
}

// kustomization decodes kustomization.yaml strictly into kustomize's own type.
func kustomization(t testing.TB) kusttypes.Kustomization {
	t.Helper()
	var k kusttypes.Kustomization
	decodeStrict(t, kubeDir+"/kustomization.yaml", readRepoFile(t, kubeDir+"/kustomization.yaml"), &k)
	return k
}

// sourceManifests decodes every file the kustomization lists, one object each, as written.
func sourceManifests(t testing.TB) *kube {
	t.Helper()
	k := &kube{}
	for _, r := range kustomization(t).Resources {
		k.decodeObject(t, r, readRepoFile(t, path.Join(kubeDir, r)))
	}
	return k
}

// renderedManifests builds the kustomization as `kubectl apply -k` would (kustomize
// itself), and decodes every object it outputs.
func renderedManifests(t testing.TB) *kube {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(repoRoot(t), kubeDir))
	if err != nil {
		t.Fatalf("kustomize build %s: %v", kubeDir, err)
	}
	k := &kube{}
	for _, r := range m.Resources() {
		data, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		k.decodeObject(t, "kustomize build: "+r.CurId().String(), data)
	}
	return k
}

// TestKubernetesManifestsDecodeStrictly: each file, as written and as kustomize renders
// it, decodes into its API type with no unknown field; the kustomization lists every
// manifest of the directory; and the decoding is strict (a misspelt field fails).
func TestKubernetesManifestsDecodeStrictly(t *testing.T) {
	k := kustomization(t)
	if k.Kind != kusttypes.KustomizationKind || k.APIVersion != kusttypes.KustomizationVersion {
		t.Errorf("kustomization.yaml: %s %s", k.APIVersion, k.Kind)
	}
	entries, err := os.ReadDir(filepath.Join(repoRoot(t), kubeDir))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		if ext := filepath.Ext(e.Name()); (ext == ".yaml" || ext == ".yml") && e.Name() != "kustomization.yaml" && e.Name() != natsValuesFile {
			files = append(files, e.Name())
		}
	}
	listed := slices.Sorted(slices.Values(k.Resources))
	if !slices.Equal(files, listed) {
		t.Errorf("kustomization.yaml lists %v; the directory has %v (and %s, Helm values, not a manifest)", listed, files, natsValuesFile)
	}
	src, out := sourceManifests(t), renderedManifests(t)
	for _, k := range []*kube{src, out} {
		if len(k.configMaps) != 1 || len(k.deployments) != 1 || len(k.services) != 1 || len(k.pdbs) != 1 ||
			len(k.serviceMonitors) != 1 || len(k.prometheusRules) != 1 {
			t.Errorf("want one ConfigMap, Deployment, Service, PodDisruptionBudget, ServiceMonitor and PrometheusRule; got %d %d %d %d %d %d",
				len(k.configMaps), len(k.deployments), len(k.services), len(k.pdbs), len(k.serviceMonitors), len(k.prometheusRules))
		}
	}

	// Strict: a field the API type does not have fails.
	data := readRepoFile(t, kubeDir+"/deployment.yaml")
	bad := strings.Replace(string(data), "terminationGracePeriodSeconds:", "terminationGracePeriod:", 1)
	if bad == string(data) {
		t.Fatal("deployment.yaml has no terminationGracePeriodSeconds; update this test")
	}
	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict([]byte(bad), &d); err == nil || !strings.Contains(err.Error(), "terminationGracePeriod") {
		t.Errorf("a misspelt field decoded: %v", err)
	}
}

// kubeWorker is the rendered Deployment's worker container and the configuration the
// ConfigMap mounts for it.
type kubeWorker struct {
	k         *kube
	d         appsv1.Deployment
	c         corev1.Container
	cfgPath   string
	cfgSource string
	cfgData   []byte
	cfg       *config.Config
}

func kubernetesWorker(t testing.TB) kubeWorker {
	t.Helper()
	k := renderedManifests(t)
	if len(k.deployments) != 1 || len(k.deployments[0].Spec.Template.Spec.Containers) != 1 {
		t.Fatal("want one Deployment with one container")
	}
	d := k.deployments[0]
	c := d.Spec.Template.Spec.Containers[0]
	w := kubeWorker{k: k, d: d, c: c}
	cfgPath, ok := flagValue(slices.Concat(c.Command, c.Args), "config")
	if !ok {
		t.Fatalf("container %s: args %q have no --config", c.Name, c.Args)
	}
	w.cfgPath = cfgPath
	// The --config file is a key of a ConfigMap mounted as a volume.
	for _, vm := range c.VolumeMounts {
		rel, ok := strings.CutPrefix(cfgPath, strings.TrimSuffix(vm.MountPath, "/")+"/")
		if !ok {
			continue
		}
		i := slices.IndexFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == vm.Name })
		if i < 0 {
			t.Fatalf("volumeMount %s: no volume of that name", vm.Name)
		}
		v := d.Spec.Template.Spec.Volumes[i]
		if v.ConfigMap == nil {
			t.Fatalf("volume %s holding %s is not a ConfigMap", v.Name, cfgPath)
		}
		key := rel
		if len(v.ConfigMap.Items) > 0 {
			j := slices.IndexFunc(v.ConfigMap.Items, func(it corev1.KeyToPath) bool { return it.Path == rel })
			if j < 0 {
				t.Fatalf("volume %s: no item has path %s", v.Name, rel)
			}
			key = v.ConfigMap.Items[j].Key
		}
		j := slices.IndexFunc(k.configMaps, func(cm corev1.ConfigMap) bool { return cm.Name == v.ConfigMap.Name })
		if j < 0 {
			t.Fatalf("volume %s mounts ConfigMap %s, which the kustomization does not have", v.Name, v.ConfigMap.Name)
		}
		data, ok := k.configMaps[j].Data[key]
		if !ok {
			t.Fatalf("ConfigMap %s has no key %s", v.ConfigMap.Name, key)
		}
		data = withSecretsMounted(t, d.Spec.Template.Spec, c, data)
		cfg, err := config.Parse([]byte(data))
		if err != nil {
			t.Fatalf("ConfigMap %s key %s (without any environment override): %v", v.ConfigMap.Name, key, err)
		}
		w.cfg, w.cfgData, w.cfgSource = cfg, []byte(data), fmt.Sprintf("%s/configmap.yaml %s[%s]", kubeDir, v.ConfigMap.Name, key)
		return w
	}
	t.Fatalf("container %s: no volumeMount holds %s", c.Name, cfgPath)
	return w
}

func TestKubernetesDeployment(t *testing.T) {
	w := kubernetesWorker(t)
	d, c, pod := w.d, w.c, w.d.Spec.Template.Spec
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
		t.Errorf("replicas %v, want 3", d.Spec.Replicas)
	}
	sel, err := metaSelector(d.Spec.Selector)
	if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) || sel.Empty() {
		t.Errorf("Deployment selector %v does not select its pods %v (%v)", d.Spec.Selector, d.Spec.Template.Labels, err)
	}
	for _, tsc := range pod.TopologySpreadConstraints {
		if s, err := metaSelector(tsc.LabelSelector); err != nil || !s.Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("topologySpreadConstraint %s selects other pods: %v", tsc.TopologyKey, tsc.LabelSelector)
		}
	}
	if c.Image == "" || c.Image == "kafkamender" {
		t.Errorf("image %q: kustomize's images should give it a tag", c.Image)
	}

	// The HTTP port is the configuration's, named http, and the probes ask it.
	_, port, err := splitHostPort(w.cfg.HTTP.Listen)
	if err != nil {
		t.Fatal(err)
	}
	if host, _, _ := splitHostPort(w.cfg.HTTP.Listen); !allInterfaces(host) {
		t.Errorf("%s: http.listen %s: the kubelet's probes and Prometheus could not reach it; want 0.0.0.0", w.cfgSource, w.cfg.HTTP.Listen)
	}
	i := slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "http" })
	if i < 0 {
		t.Fatalf("container %s has no port named http", c.Name)
	}
	if strconv.Itoa(int(c.Ports[i].ContainerPort)) != port {
		t.Errorf("containerPort %d; %s listens on %s", c.Ports[i].ContainerPort, w.cfgSource, port)
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("no HTTP %s probe", p.name)
			continue
		}
		if p.probe.HTTPGet.Path != p.path || !portIs(p.probe.HTTPGet.Port, c.Ports[i]) {
			t.Errorf("%s probe GETs %s on %s; want %s on the http port", p.name, p.probe.HTTPGet.Path, p.probe.HTTPGet.Port.String(), p.path)
		}
	}

	// Resources and a locked-down security context, as the image allows (non-root by number,
	// writes nothing).
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := c.Resources.Requests[r]; !ok {
			t.Errorf("no %s request", r)
		}
	}
	if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
		t.Error("no memory limit")
	}
	sc := c.SecurityContext
	if sc == nil || !isTrue(sc.RunAsNonRoot) || !isTrue(sc.ReadOnlyRootFilesystem) || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		t.Errorf("container securityContext %+v: want runAsNonRoot, readOnlyRootFilesystem, no privilege escalation, drop ALL", sc)
	}
	users := commands[*instructions.UserCommand](parseDockerfile(t).final)
	if len(users) > 0 && pod.SecurityContext != nil && pod.SecurityContext.RunAsUser != nil {
		uid, _, _ := strings.Cut(users[len(users)-1].User, ":")
		if strconv.FormatInt(*pod.SecurityContext.RunAsUser, 10) != uid {
			t.Errorf("runAsUser %d; the image's USER is %s", *pod.SecurityContext.RunAsUser, uid)
		}
	}

	// A graceful stop: the worker gives its HTTP server and then its clients 10s each
	// (internal/worker) after handing its event back; the kubelet must wait longer.
	if g := pod.TerminationGracePeriodSeconds; g == nil || *g < 30 {
		t.Errorf("terminationGracePeriodSeconds %v: want at least 30 for a graceful stop", g)
	}
}

// TestKubernetesEnvironment: every variable the container sets is a configuration
// override of a key the worker has, and the Service's links do not add KAFKAMENDER_*
// variables of their own.
func TestKubernetesEnvironment(t *testing.T) {
	w := kubernetesWorker(t)
	// The worker's configuration as the pod gets it: the ConfigMap's file with the
	// container's variables (placeholders for the Secret's values).
	var environ []string
	for _, e := range w.c.Env {
		value := e.Value
		if e.ValueFrom != nil {
			value = "nats://user:password@nats.example:4222" // the one Secret value: a NATS URL
		}
		environ = append(environ, e.Name+"="+value)
	}
	cfg, err := config.ParseEnv(w.cfgData, environ)
	if err != nil {
		t.Fatalf("%s with the container's environment: %v", w.cfgSource, err)
	}
	for _, e := range w.c.Env {
		if !slices.Contains(cfg.EnvOverrides, e.Name) {
			t.Errorf("env %s overrides no configuration key (applied: %v)", e.Name, cfg.EnvOverrides)
		}
	}
	secretRefs := 0
	for _, e := range w.c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			secretRefs++
			ref := e.ValueFrom.SecretKeyRef
			if ref.Optional != nil && *ref.Optional {
				t.Errorf("env %s: the Secret is optional; the placeholder in the ConfigMap would be used silently", e.Name)
			}
			// The Secret is not in the kustomization (credentials stay out of git): the
			// README says how to create it.
			readme := string(readRepoFile(t, kubeDir+"/README.md"))
			want := regexp.MustCompile(`create secret generic ` + regexp.QuoteMeta(ref.Name) + `\b[^\n]*--from-literal=` + regexp.QuoteMeta(ref.Key) + `=`)
			if !want.MatchString(readme) {
				t.Errorf("env %s needs Secret %s key %s; %s/README.md does not say how to create it", e.Name, ref.Name, ref.Key, kubeDir)
			}
		}
	}
	if secretRefs == 0 || !slices.ContainsFunc(w.c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "KAFKAMENDER_NATS_URL" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil
	}) {
		t.Error("want KAFKAMENDER_NATS_URL from a Secret")
	}
	for _, s := range w.k.services {
		prefix := strings.ToUpper(strings.ReplaceAll(s.Name, "-", "_")) + "_"
		links := w.d.Spec.Template.Spec.EnableServiceLinks
		if strings.HasPrefix(prefix, "KAFKAMENDER_") {
			if links == nil || *links {
				t.Errorf("Service %s gives every pod %sSERVICE_HOST, %sPORT, ...: set enableServiceLinks: false", s.Name, prefix, prefix)
			}
		}
	}
}

// TestKubernetesSelectors: the Service, the PodDisruptionBudget and the ServiceMonitor
// select what they are for, on ports that exist.
func TestKubernetesSelectors(t *testing.T) {
	w := kubernetesWorker(t)
	k, pods := w.k, labels.Set(w.d.Spec.Template.Labels)
	svc := k.services[0]
	if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(pods) {
		t.Errorf("Service %s selects %v, not the pods %v", svc.Name, svc.Spec.Selector, pods)
	}
	var httpPort *corev1.ServicePort
	for i, p := range svc.Spec.Ports {
		if !slices.ContainsFunc(w.c.Ports, func(cp corev1.ContainerPort) bool { return portIs(p.TargetPort, cp) }) {
			t.Errorf("Service port %s targets %s, which the container does not have", p.Name, p.TargetPort.String())
		}
		if p.Name == "http" {
			httpPort = &svc.Spec.Ports[i]
		}
	}
	if httpPort == nil {
		t.Fatalf("Service %s has no port named http", svc.Name)
	}

	pdb := k.pdbs[0]
	if s, err := metaSelector(pdb.Spec.Selector); err != nil || s.Empty() || !s.Matches(pods) {
		t.Errorf("PodDisruptionBudget selects %v, not the pods %v", pdb.Spec.Selector, pods)
	}
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() < 1 || int32(pdb.Spec.MaxUnavailable.IntValue()) >= *w.d.Spec.Replicas {
		t.Errorf("PodDisruptionBudget maxUnavailable %v: want at least 1 and fewer than the %d replicas", pdb.Spec.MaxUnavailable, *w.d.Spec.Replicas)
	}

	sm := k.serviceMonitors[0]
	if s, err := metaSelector(&sm.Spec.Selector); err != nil || s.Empty() || !s.Matches(labels.Set(svc.Labels)) {
		t.Errorf("ServiceMonitor selects %v, not Service %s %v", sm.Spec.Selector, svc.Name, svc.Labels)
	}
	if len(sm.Spec.Endpoints) == 0 {
		t.Fatal("ServiceMonitor has no endpoint")
	}
	for _, ep := range sm.Spec.Endpoints {
		if ep.Port != httpPort.Name || ep.Path != "/metrics" {
			t.Errorf("ServiceMonitor endpoint port %q path %q: want port %s, path /metrics", ep.Port, ep.Path, httpPort.Name)
		}
	}

	// The job label the ServiceMonitor gives the series is the one the rules expect.
	job := svc.Name
	if sm.Spec.JobLabel != "" {
		job = svc.Labels[sm.Spec.JobLabel]
	}
	for _, g := range k.prometheusRules[0].Spec.Groups {
		for _, r := range g.Rules {
			e, err := ParseExpr(r.Expr.String())
			if err != nil {
				t.Fatalf("rule %s: %v", r.Alert, err)
			}
			for _, vs := range selectors(e) {
				for _, m := range vs.LabelMatchers {
					if m.Name == "job" && !m.Matches(job) {
						t.Errorf("rule %s selects %s; the ServiceMonitor's series have job=%q", r.Alert, vs, job)
					}
				}
			}
		}
	}
	if !slices.Contains(kustomization(t).Resources, path.Base(generate.PrometheusRuleFile)) {
		t.Errorf("the kustomization does not apply the generated %s", generate.PrometheusRuleFile)
	}
}

func metaSelector(s *metav1.LabelSelector) (labels.Selector, error) {
	return metav1.LabelSelectorAsSelector(s)
}

// portIs reports whether a probe's or Service's port refers to the container port, by
// name or by number.
func portIs(p intstr.IntOrString, cp corev1.ContainerPort) bool {
	if p.Type == intstr.String {
		return p.StrVal == cp.Name
	}
	return p.IntVal == cp.ContainerPort
}

func isTrue(b *bool) bool { return b != nil && *b }

// withSecretsMounted returns the configuration text with every path under a Secret
// volume's mount (a *_file the worker reads at start-up) moved to a temporary directory
// holding each item of the Secret as the kubelet would mount it: a file, here with a
// placeholder value. A path under such a mount that is not one of its items stays, and
// fails to load.
func withSecretsMounted(t testing.TB, pod corev1.PodSpec, c corev1.Container, cfg string) string {
	t.Helper()
	for _, vm := range c.VolumeMounts {
		i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == vm.Name })
		if i < 0 || pod.Volumes[i].Secret == nil {
			continue
		}
		dir := t.TempDir()
		for _, it := range pod.Volumes[i].Secret.Items {
			if err := os.WriteFile(filepath.Join(dir, it.Path), []byte("placeholder-"+it.Key+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		cfg = strings.ReplaceAll(cfg, strings.TrimSuffix(vm.MountPath, "/")+"/", dir+"/")
	}
	return cfg
}

// The webhook changes clusters: in the manifests it has a port of its own, needs the
// bearer token, and the NetworkPolicy admits only Alertmanager's pods to that port, while
// the health and metrics port stays open to probes and Prometheus.
func TestKubernetesWebhookDoor(t *testing.T) {
	w := kubernetesWorker(t)
	am := w.cfg.Alertmanager
	if !am.Authenticated() {
		t.Errorf("%s: the webhook needs no credential", w.cfgSource)
	}
	_, port, err := splitHostPort(am.Listen)
	if err != nil {
		t.Fatalf("alertmanager.listen %q: %v", am.Listen, err)
	}
	i := slices.IndexFunc(w.c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "webhook" })
	if i < 0 || fmt.Sprint(w.c.Ports[i].ContainerPort) != port {
		t.Fatalf("container ports %v: want one named webhook, %s (alertmanager.listen)", w.c.Ports, port)
	}
	pods := labels.Set(w.d.Spec.Template.Labels)
	if len(w.k.networkPolicies) != 1 {
		t.Fatalf("%d NetworkPolicies, want 1", len(w.k.networkPolicies))
	}
	np := w.k.networkPolicies[0]
	if s, err := metaSelector(&np.Spec.PodSelector); err != nil || s.Empty() || !s.Matches(pods) {
		t.Fatalf("NetworkPolicy selects %v, not the pods %v", np.Spec.PodSelector, pods)
	}
	covers := func(ports []networkingv1.NetworkPolicyPort, name string) bool {
		return len(ports) == 0 || slices.ContainsFunc(ports, func(p networkingv1.NetworkPolicyPort) bool {
			return p.Port == nil || p.Port.String() == name
		})
	}
	webhook, http := false, false
	for _, rule := range np.Spec.Ingress {
		if covers(rule.Ports, "webhook") {
			webhook = true
			if len(rule.From) == 0 {
				t.Errorf("an ingress rule admits anyone to the webhook port: %+v", rule)
			}
			for _, peer := range rule.From {
				if peer.PodSelector == nil || len(peer.PodSelector.MatchLabels) == 0 || peer.IPBlock != nil {
					t.Errorf("an ingress rule admits more than Alertmanager's pods to the webhook port: %+v", peer)
				}
			}
		}
		if covers(rule.Ports, "http") && len(rule.From) == 0 {
			http = true
		}
	}
	if !webhook || !http {
		t.Errorf("NetworkPolicy ingress %+v: want the webhook port admitted from Alertmanager (%v) and http from anywhere (%v)", np.Spec.Ingress, webhook, http)
	}
}

// natsValuesFile holds the Helm values of the official NATS chart for the cluster the
// workers use: in the directory, not in the kustomization (Helm installs it).
const natsValuesFile = "nats-values.yaml"

// natsChartVersion is the version of the chart whose values.yaml the key names of
// natsChartValues were read from (https://github.com/nats-io/k8s, helm/charts/nats), and
// which the README's helm command installs.
const natsChartVersion = "2.14.2"

// natsChartValues holds the keys of the NATS chart's values.yaml that nats-values.yaml
// may set, as the chart spells them. Decoding is strict: a misspelt key, which Helm would
// ignore without a word, fails here (as does a key this type does not list yet: add it,
// from the chart's values.yaml).
type natsChartValues struct {
	NameOverride     string `json:"nameOverride"`
	FullnameOverride string `json:"fullnameOverride"`
	Config           struct {
		Cluster struct {
			Enabled     *bool `json:"enabled"`
			Port        int   `json:"port"`
			Replicas    *int  `json:"replicas"`
			NoAdvertise *bool `json:"noAdvertise"`
		} `json:"cluster"`
		JetStream struct {
			Enabled   *bool `json:"enabled"`
			FileStore struct {
				Enabled *bool  `json:"enabled"`
				Dir     string `json:"dir"`
				PVC     struct {
					Enabled          *bool   `json:"enabled"`
					Size             string  `json:"size"`
					StorageClassName *string `json:"storageClassName"`
				} `json:"pvc"`
				MaxSize string `json:"maxSize"`
			} `json:"fileStore"`
		} `json:"jetstream"`
		NATS struct {
			Port int `json:"port"`
		} `json:"nats"`
		Monitor struct {
			Enabled *bool `json:"enabled"`
		} `json:"monitor"`
		// Merge is merged into the generated nats.conf as it is (keys of the server's
		// configuration file).
		Merge map[string]any `json:"merge"`
	} `json:"config"`
	Container struct {
		Image struct {
			Repository string `json:"repository"`
			Tag        string `json:"tag"`
		} `json:"image"`
		Resources corev1.ResourceRequirements `json:"resources"`
	} `json:"container"`
	PodTemplate struct {
		// topologyKey: the constraint (the chart adds the key and the pods' selector).
		TopologySpreadConstraints map[string]corev1.TopologySpreadConstraint `json:"topologySpreadConstraints"`
	} `json:"podTemplate"`
	Service struct {
		Name string `json:"name"`
	} `json:"service"`
}

// natsValues decodes nats-values.yaml strictly.
func natsValues(t testing.TB) natsChartValues {
	t.Helper()
	var v natsChartValues
	decodeStrict(t, kubeDir+"/"+natsValuesFile, readRepoFile(t, kubeDir+"/"+natsValuesFile), &v)
	return v
}

// helmInstall is the README's command that installs the NATS chart.
type helmInstall struct {
	release, chart, namespace, version string
	values                             []string
}

// readmeHelmInstall finds `helm upgrade --install <release> nats/nats ...` in the README
// (continued lines joined) and reads its release, namespace, chart version and values files.
func readmeHelmInstall(t testing.TB) helmInstall {
	t.Helper()
	readme := strings.ReplaceAll(string(readRepoFile(t, kubeDir+"/README.md")), "\\\n", " ")
	m := regexp.MustCompile(`helm (?:upgrade --install|install) (\S+) (nats/nats)\b([^\n]*)`).FindStringSubmatch(readme)
	if m == nil {
		t.Fatalf("%s/README.md: no `helm upgrade --install <release> nats/nats` command", kubeDir)
	}
	h := helmInstall{release: m[1], chart: m[2]}
	args := strings.Fields(m[3])
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "--namespace", "-n":
			h.namespace = args[i+1]
		case "--version":
			h.version = args[i+1]
		case "-f", "--values":
			h.values = append(h.values, args[i+1])
		}
	}
	return h
}

// TestKubernetesNATSValues: the NATS the workers use on Kubernetes is the official chart
// installed with nats-values.yaml: a cluster of three JetStream nodes storing on a
// PersistentVolumeClaim each (big enough for what the fleet reserves), running the
// nats-server the product pins, spread over the Kubernetes nodes. The README installs it
// with the chart version these key names come from, and the worker's NATS URL (the
// README's Secret, the ConfigMap's placeholder) is the release's client Service.
func TestKubernetesNATSValues(t *testing.T) {
	v := natsValues(t)
	c := v.Config
	if !isTrue(c.Cluster.Enabled) {
		t.Errorf("%s: config.cluster.enabled is not true: one NATS server, no JetStream replicas", natsValuesFile)
	}
	if c.Cluster.Replicas == nil || *c.Cluster.Replicas != 3 {
		t.Errorf("%s: config.cluster.replicas %s, want 3 (a quorum of 2 survives one node lost)", natsValuesFile, show(c.Cluster.Replicas))
	}
	if !isTrue(c.JetStream.Enabled) {
		t.Errorf("%s: config.jetstream.enabled is not true", natsValuesFile)
	}
	fs := c.JetStream.FileStore
	if !isTrue(fs.Enabled) || !isTrue(fs.PVC.Enabled) {
		t.Errorf("%s: config.jetstream.fileStore.enabled %s, .pvc.enabled %s: want both true (streams on a volume that outlives the pod)",
			natsValuesFile, show(fs.Enabled), show(fs.PVC.Enabled))
	}
	// Every node stores a copy of every stream: each node's store (the PVC's size, or
	// maxSize) must hold what the fleet reserves (docs/operations.md, Storage limits).
	least := resource.MustParse("2Gi")
	for key, size := range map[string]string{"pvc.size": fs.PVC.Size, "maxSize": fs.MaxSize} {
		if size == "" {
			if key == "pvc.size" {
				t.Errorf("%s: config.jetstream.fileStore.pvc.size is not set", natsValuesFile)
			}
			continue
		}
		q, err := resource.ParseQuantity(size)
		if err != nil {
			t.Errorf("%s: config.jetstream.fileStore.%s %q: %v", natsValuesFile, key, size, err)
			continue
		}
		if q.Cmp(least) < 0 {
			t.Errorf("%s: config.jetstream.fileStore.%s %s: the fleet's streams and buckets reserve about %s on every node", natsValuesFile, key, size, least.String())
		}
	}
	if want := pinnedNATSServer(t) + "-alpine"; v.Container.Image.Tag != want || (v.Container.Image.Repository != "" && v.Container.Image.Repository != "nats") {
		t.Errorf("%s: container.image %s:%s, want nats:%s (the version the local stack and the tests run)", natsValuesFile, v.Container.Image.Repository, v.Container.Image.Tag, want)
	}
	if _, ok := v.PodTemplate.TopologySpreadConstraints["kubernetes.io/hostname"]; !ok {
		t.Errorf("%s: no podTemplate.topologySpreadConstraints on kubernetes.io/hostname: two NATS nodes on one machine lose the quorum together", natsValuesFile)
	}
	// A node that hangs is dropped after ping_interval × (ping_max + 1): the local stack's
	// settings, which the fault tests ran with.
	if iv, _ := v.Config.Merge["ping_interval"].(string); iv != "5s" || v.Config.Merge["ping_max"] != float64(2) {
		t.Errorf("%s: config.merge ping_interval %v, ping_max %v; want 5s and 2, as the local stack runs (a hung node is dropped in 15 s, not minutes)",
			natsValuesFile, v.Config.Merge["ping_interval"], v.Config.Merge["ping_max"])
	}
	if v.Config.Monitor.Enabled != nil && !*v.Config.Monitor.Enabled {
		t.Errorf("%s: config.monitor.enabled is false: the chart's probes (/healthz) need it", natsValuesFile)
	}

	// The README installs that chart, at that version, with this file.
	h := readmeHelmInstall(t)
	if h.version != natsChartVersion {
		t.Errorf("%s/README.md: helm installs chart %s version %q; the key names here are those of %s (check them against its values.yaml, then update natsChartVersion)", kubeDir, h.chart, h.version, natsChartVersion)
	}
	if !slices.Contains(h.values, kubeDir+"/"+natsValuesFile) {
		t.Errorf("%s/README.md: helm is given values %v, not %s/%s", kubeDir, h.values, kubeDir, natsValuesFile)
	}
	if h.namespace == "" {
		t.Fatalf("%s/README.md: the helm command names no --namespace", kubeDir)
	}

	// The client Service the release makes: the chart's fullname (the release's name when
	// it contains the chart's, else <release>-nats), in the release's namespace.
	svc := v.Service.Name
	if svc == "" {
		svc = v.FullnameOverride
	}
	if svc == "" {
		name := cmp.Or(v.NameOverride, "nats")
		svc = h.release
		if !strings.Contains(h.release, name) {
			svc = h.release + "-" + name
		}
	}
	host := svc + "." + h.namespace + ".svc"
	port := strconv.Itoa(cmp.Or(c.NATS.Port, 4222))
	readme := string(readRepoFile(t, kubeDir+"/README.md"))
	m := regexp.MustCompile(`create secret generic kafkamender-nats\b[^\n]*--from-literal=url=(\S+)`).FindStringSubmatch(readme)
	if m == nil {
		t.Fatalf("%s/README.md does not create the Secret kafkamender-nats", kubeDir)
	}
	w := kubernetesWorker(t)
	for source, raw := range map[string]string{"README.md's Secret kafkamender-nats": m[1], w.cfgSource + " nats.url": w.cfg.NATS.URL.Reveal()} {
		for one := range strings.SplitSeq(raw, ",") {
			u, err := url.Parse(strings.TrimSpace(one))
			if err != nil {
				t.Errorf("%s: %v", source, err)
				continue
			}
			if u.Hostname() != host && !strings.HasPrefix(u.Hostname(), host+".") || u.Port() != port {
				t.Errorf("%s: %s; the chart's release %s in namespace %s serves clients at %s:%s", source, u.Redacted(), h.release, h.namespace, host, port)
			}
		}
	}

	// The workers keep every stream and bucket on all three nodes.
	if r := w.cfg.NATS.Replicas; r != 3 {
		t.Errorf("%s: nats.replicas %d, want 3, said explicitly", w.cfgSource, r)
	} else if c.Cluster.Replicas != nil && r > *c.Cluster.Replicas {
		t.Errorf("%s: nats.replicas %d: the chart runs %d NATS servers", w.cfgSource, r, *c.Cluster.Replicas)
	}
}

// show formats an optional value of the Helm values: unset, or the value.
func show[T any](p *T) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}
