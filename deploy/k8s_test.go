package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

const overlays = "k8s/overlays"

// rendered is one overlay as Kustomize builds it, decoded by kind.
type rendered struct {
	namespaces      []corev1.Namespace
	serviceAccounts []corev1.ServiceAccount
	configMaps      []corev1.ConfigMap
	services        []corev1.Service
	statefulSets    []appsv1.StatefulSet
	pdbs            []policyv1.PodDisruptionBudget
}

// render builds dir with Kustomize in-process and decodes every object
// strictly: a field the API type does not have fails the test.
func render(t *testing.T, dir string) *rendered {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var r rendered
	for _, res := range m.Resources() {
		data, err := res.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		var into any
		switch kind := res.GetApiVersion() + " " + res.GetKind(); kind {
		case "v1 Namespace":
			r.namespaces = append(r.namespaces, corev1.Namespace{})
			into = &r.namespaces[len(r.namespaces)-1]
		case "v1 ServiceAccount":
			r.serviceAccounts = append(r.serviceAccounts, corev1.ServiceAccount{})
			into = &r.serviceAccounts[len(r.serviceAccounts)-1]
		case "v1 ConfigMap":
			r.configMaps = append(r.configMaps, corev1.ConfigMap{})
			into = &r.configMaps[len(r.configMaps)-1]
		case "v1 Service":
			r.services = append(r.services, corev1.Service{})
			into = &r.services[len(r.services)-1]
		case "apps/v1 StatefulSet":
			r.statefulSets = append(r.statefulSets, appsv1.StatefulSet{})
			into = &r.statefulSets[len(r.statefulSets)-1]
		case "policy/v1 PodDisruptionBudget":
			r.pdbs = append(r.pdbs, policyv1.PodDisruptionBudget{})
			into = &r.pdbs[len(r.pdbs)-1]
		default:
			t.Fatalf("%s: unexpected object %s %s", dir, kind, res.GetName())
		}
		if err := yaml.UnmarshalStrict(data, into); err != nil {
			t.Fatalf("%s: %s %s: %v\n%s", dir, res.GetKind(), res.GetName(), err, data)
		}
	}
	return &r
}

func regions(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir(overlays)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	if len(out) == 0 {
		t.Fatalf("no overlays in %s", overlays)
	}
	return out
}

func matches(t *testing.T, sel *metav1.LabelSelector, set map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatal(err)
	}
	return !s.Empty() && s.Matches(labels.Set(set))
}

func TestOverlays(t *testing.T) {
	all := regions(t)
	for _, region := range all {
		t.Run(region, func(t *testing.T) { checkOverlay(t, region, all) })
	}
}

func checkOverlay(t *testing.T, region string, all []string) {
	r := render(t, filepath.Join(overlays, region))
	if len(r.namespaces) != 1 || r.namespaces[0].Name != region {
		t.Errorf("namespaces %v, want one, %s", r.namespaces, region)
	}
	if len(r.configMaps) != 1 || len(r.statefulSets) != 1 || len(r.services) != 2 || len(r.pdbs) != 1 || len(r.serviceAccounts) != 1 {
		t.Fatalf("want 1 ConfigMap, StatefulSet, PodDisruptionBudget, ServiceAccount and 2 Services; got %d, %d, %d, %d, %d",
			len(r.configMaps), len(r.statefulSets), len(r.pdbs), len(r.serviceAccounts), len(r.services))
	}
	for _, meta := range []metav1.ObjectMeta{r.configMaps[0].ObjectMeta, r.statefulSets[0].ObjectMeta, r.pdbs[0].ObjectMeta,
		r.serviceAccounts[0].ObjectMeta, r.services[0].ObjectMeta, r.services[1].ObjectMeta} {
		if meta.Namespace != region {
			t.Errorf("%s is in namespace %q, want %s", meta.Name, meta.Namespace, region)
		}
	}

	// The site config: what stabilizerd check accepts, for this region.
	cm := r.configMaps[0]
	data, ok := cm.Data["site.yaml"]
	if !ok {
		t.Fatalf("ConfigMap %s has no site.yaml (keys %v)", cm.Name, cm.Data)
	}
	checkConfig(t, region+".yaml", []byte(data))
	cfg := parseSiteConfig(t, []byte(data))
	if cfg.Site != region || cfg.Insecure {
		t.Errorf("site config of %s: site %q, insecure %v", region, cfg.Site, cfg.Insecure)
	}

	sts := r.statefulSets[0]
	pod := sts.Spec.Template.Spec
	if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 1 {
		t.Errorf("StatefulSet replicas %v, want 1 (one site per region)", sts.Spec.Replicas)
	}
	if !matches(t, sts.Spec.Selector, sts.Spec.Template.Labels) {
		t.Errorf("StatefulSet selector %v does not select its pods %v", sts.Spec.Selector, sts.Spec.Template.Labels)
	}
	if pod.ServiceAccountName != r.serviceAccounts[0].Name {
		t.Errorf("pod's service account %q, want %q", pod.ServiceAccountName, r.serviceAccounts[0].Name)
	}
	if pod.TerminationGracePeriodSeconds == nil || *pod.TerminationGracePeriodSeconds < 10 {
		t.Errorf("terminationGracePeriodSeconds %v, want at least 10 (stabilizerd shuts down within 5 s)", pod.TerminationGracePeriodSeconds)
	}
	if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 || sc.FSGroup == nil {
		t.Errorf("pod securityContext %+v: want runAsNonRoot, a non-zero runAsUser and an fsGroup (for the volume)", sc)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("container securityContext %+v: want readOnlyRootFilesystem and no privilege escalation", sc)
	}
	for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := c.Resources.Requests[res]; !ok || q.IsZero() {
			t.Errorf("no %s request", res)
		}
	}
	if q, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok || q.Cmp(c.Resources.Requests[corev1.ResourceMemory]) < 0 {
		t.Errorf("memory limit %v, want one at or above the request", q)
	}

	// Container ports by name, against the site's listen addresses.
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	listen := map[string]string{"data": cfg.Listen.Data, "control": cfg.Listen.Control, "client": cfg.Listen.Client, "http": cfg.Listen.HTTP}
	for name, addr := range listen {
		if ports[name] != port(t, addr) {
			t.Errorf("container port %s is %d, the config listens on %s", name, ports[name], addr)
		}
	}
	for name, probe := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if probe == nil || probe.HTTPGet == nil {
			t.Errorf("no %s httpGet probe", name)
			continue
		}
		p := probe.HTTPGet.Port.IntVal
		if probe.HTTPGet.Port.StrVal != "" {
			p = ports[probe.HTTPGet.Port.StrVal]
		}
		if probe.HTTPGet.Path != "/healthz" || p != port(t, cfg.Listen.HTTP) {
			t.Errorf("%s probe GETs %s on port %d, want /healthz on %d (listen.http)", name, probe.HTTPGet.Path, p, port(t, cfg.Listen.HTTP))
		}
	}

	if a := sts.Spec.Template.Annotations; a["prometheus.io/scrape"] != "true" || a["prometheus.io/path"] != "/metrics" ||
		a["prometheus.io/port"] != fmt.Sprint(port(t, cfg.Listen.HTTP)) {
		t.Errorf("pod annotations %v: want prometheus.io/scrape, /metrics and port %d (listen.http)", a, port(t, cfg.Listen.HTTP))
	}

	// Mounts: the volume claim at data_dir's folder, the config, the TLS Secret.
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	if len(sts.Spec.VolumeClaimTemplates) != 1 {
		t.Fatalf("%d volumeClaimTemplates, want 1", len(sts.Spec.VolumeClaimTemplates))
	}
	claim := sts.Spec.VolumeClaimTemplates[0]
	dm, ok := mounts[claim.Name]
	if !ok {
		t.Fatalf("volume claim %s is not mounted", claim.Name)
	}
	// data_dir.snapshots, its sibling, must be on the volume too.
	if dm.MountPath != filepath.Dir(cfg.DataDir) {
		t.Errorf("volume %s is mounted at %s; data_dir %s (and %s.snapshots) want it at %s", claim.Name, dm.MountPath,
			cfg.DataDir, cfg.DataDir, filepath.Dir(cfg.DataDir))
	}
	if q := claim.Spec.Resources.Requests[corev1.ResourceStorage]; q.IsZero() {
		t.Errorf("volume claim %s requests no storage", claim.Name)
	}
	var configMount, tlsMount string
	for name, v := range volumes {
		switch {
		case v.ConfigMap != nil && v.ConfigMap.Name == cm.Name:
			configMount = mounts[name].MountPath
		case v.Secret != nil:
			tlsMount = mounts[name].MountPath
			if v.Secret.SecretName != "stabilizer-tls" || len(v.Secret.Items) != 0 {
				t.Errorf("TLS volume %s: Secret %q, items %v; want all of stabilizer-tls", name, v.Secret.SecretName, v.Secret.Items)
			}
		}
	}
	if configMount == "" || !slices.Equal(c.Args, []string{"--config", configMount + "/site.yaml"}) {
		t.Errorf("args %q, ConfigMap %s mounted at %q", c.Args, cm.Name, configMount)
	}
	for _, f := range []struct{ field, path, key string }{{"tls.cert", cfg.TLS.Cert, "tls.crt"},
		{"tls.key", cfg.TLS.Key, "tls.key"}, {"tls.ca", cfg.TLS.CA, "ca.crt"}} {
		if tlsMount == "" || f.path != tlsMount+"/"+f.key {
			t.Errorf("%s is %s; the Secret's %s is at %s/%s", f.field, f.path, f.key, tlsMount, f.key)
		}
	}

	// Services: the headless one names the pods the other regions dial.
	var peers, client *corev1.Service
	for i := range r.services {
		s := &r.services[i]
		if !matches(t, &metav1.LabelSelector{MatchLabels: s.Spec.Selector}, sts.Spec.Template.Labels) {
			t.Errorf("Service %s selects %v, not the pods %v", s.Name, s.Spec.Selector, sts.Spec.Template.Labels)
		}
		if s.Spec.ClusterIP == corev1.ClusterIPNone {
			peers = s
		} else {
			client = s
		}
	}
	if peers == nil || client == nil {
		t.Fatal("want a headless peer Service and a client Service")
	}
	if peers.Name != sts.Spec.ServiceName || !peers.Spec.PublishNotReadyAddresses {
		t.Errorf("headless Service %s (publishNotReadyAddresses %v); StatefulSet serviceName %s", peers.Name,
			peers.Spec.PublishNotReadyAddresses, sts.Spec.ServiceName)
	}
	checkServicePorts(t, peers, ports, listen, "data", "control")
	checkServicePorts(t, client, ports, listen, "client", "http")

	// Peers: every other region at its pod's name under its headless Service.
	for _, s := range cfg.Sites {
		if s.Name == region {
			continue
		}
		if !slices.Contains(all, s.Name) {
			t.Errorf("peer %s has no overlay", s.Name)
		}
		host := sts.Name + "-0." + peers.Name + "." + s.Name + ".svc.cluster.local"
		for plane, addr := range map[string]string{"data": s.Data, "control": s.Control, "client": s.Client} {
			if want := host + ":" + strings.TrimPrefix(listen[plane], ":"); addr != want {
				t.Errorf("%s reaches %s's %s at %s, want %s", region, s.Name, plane, addr, want)
			}
		}
	}

	pdb := r.pdbs[0]
	if !matches(t, pdb.Spec.Selector, sts.Spec.Template.Labels) {
		t.Errorf("PodDisruptionBudget selects %v, not the pods %v", pdb.Spec.Selector, sts.Spec.Template.Labels)
	}
	if (pdb.Spec.MaxUnavailable == nil) == (pdb.Spec.MinAvailable == nil) {
		t.Errorf("PodDisruptionBudget: want one of maxUnavailable and minAvailable")
	}
	if m := pdb.Spec.MinAvailable; m != nil && m.IntValue() >= int(*sts.Spec.Replicas) {
		t.Errorf("minAvailable %v with %d replicas blocks every node drain", m, *sts.Spec.Replicas)
	}
}

// checkServicePorts: the Service has the named ports, each at the site's
// listen port and aimed at the container's port of that name.
func checkServicePorts(t *testing.T, s *corev1.Service, container map[string]int32, listen map[string]string, names ...string) {
	t.Helper()
	for _, name := range names {
		i := slices.IndexFunc(s.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == name })
		if i < 0 {
			t.Errorf("Service %s has no port %s", s.Name, name)
			continue
		}
		p := s.Spec.Ports[i]
		target := p.TargetPort.IntVal
		if p.TargetPort.StrVal != "" {
			target = container[p.TargetPort.StrVal]
		}
		if want := port(t, listen[name]); p.Port != want || target != want {
			t.Errorf("Service %s port %s: %d -> %d, the site listens on %s", s.Name, name, p.Port, target, listen[name])
		}
	}
}

// TestOverlaysAreGenerated: the committed overlays are what genconfig
// writes for ec2-3 now, byte for byte. After a change, regenerate with
// stabilizerd genconfig --topology ec2-3 --kubernetes deploy/k8s/overlays.
func TestOverlaysAreGenerated(t *testing.T) {
	dir := t.TempDir()
	runStabilizerd(t, "genconfig", "--topology", "ec2-3", "--kubernetes", dir)
	files := func(root string) map[string]string {
		out := map[string]string{}
		err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(path)
			rel, _ := filepath.Rel(root, path)
			out[rel] = string(b)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	got, want := files(dir), files(overlays)
	for name, w := range want {
		if g, ok := got[name]; !ok {
			t.Errorf("%s/%s is not generated any more", overlays, name)
		} else if g != w {
			t.Errorf("%s/%s differs from what genconfig writes:\n--- committed\n%s\n--- generated\n%s", overlays, name, w, g)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("genconfig writes %s, which is not committed in %s", name, overlays)
		}
	}
	if t.Failed() {
		t.Log("regenerate: stabilizerd genconfig --topology ec2-3 --kubernetes deploy/k8s/overlays")
	}
}
