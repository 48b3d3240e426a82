package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/raftmq/raftmq/raftlog"
)

// k8sKinds are the kinds the manifests may hold, by apiVersion and kind.
var k8sKinds = map[string]func() runtime.Object{
	"v1/Namespace":                  func() runtime.Object { return &corev1.Namespace{} },
	"v1/ConfigMap":                  func() runtime.Object { return &corev1.ConfigMap{} },
	"v1/Service":                    func() runtime.Object { return &corev1.Service{} },
	"apps/v1/Deployment":            func() runtime.Object { return &appsv1.Deployment{} },
	"apps/v1/StatefulSet":           func() runtime.Object { return &appsv1.StatefulSet{} },
	"policy/v1/PodDisruptionBudget": func() runtime.Object { return &policyv1.PodDisruptionBudget{} },
}

// manifests are the decoded objects under k8s/.
type manifests struct {
	objs []runtime.Object
	from map[runtime.Object]string // "file#document"
}

// decodeManifests splits every k8s/*.yaml into documents and decodes each
// strictly into its Kubernetes API type: an unknown or misspelt field, a
// duplicate key or a value of the wrong type fails, as `kubectl apply
// --validate=strict` would.
func decodeManifests(t *testing.T) manifests {
	t.Helper()
	files, err := filepath.Glob("k8s/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests under k8s/ (%v)", err)
	}
	m := manifests{from: map[runtime.Object]string{}}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
		for i := 0; ; i++ {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			name := fmt.Sprintf("%s#%d", f, i)
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if tm == (metav1.TypeMeta{}) {
				continue // comments only
			}
			newObj, ok := k8sKinds[tm.APIVersion+"/"+tm.Kind]
			if !ok {
				t.Errorf("%s: unexpected %s %s", name, tm.APIVersion, tm.Kind)
				continue
			}
			obj := newObj()
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				t.Errorf("%s (%s): %v", name, tm.Kind, err)
				continue
			}
			m.objs = append(m.objs, obj)
			m.from[obj] = name
		}
	}
	return m
}

// all returns the objects of type T.
func all[T runtime.Object](m manifests) []T {
	var out []T
	for _, o := range m.objs {
		if v, ok := o.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// one returns the object of type T named name.
func one[T interface {
	runtime.Object
	GetName() string
}](t *testing.T, m manifests, name string) T {
	t.Helper()
	for _, o := range all[T](m) {
		if o.GetName() == name {
			return o
		}
	}
	var zero T
	t.Fatalf("no %T named %s", zero, name)
	return zero
}

// podTemplates returns the pod templates of the workloads, by workload.
func podTemplates(m manifests) map[string]*corev1.PodTemplateSpec {
	out := map[string]*corev1.PodTemplateSpec{}
	for _, d := range all[*appsv1.Deployment](m) {
		out["Deployment "+d.Name] = &d.Spec.Template
	}
	for _, s := range all[*appsv1.StatefulSet](m) {
		out["StatefulSet "+s.Name] = &s.Spec.Template
	}
	return out
}

func TestK8sManifestsDecodeStrictly(t *testing.T) {
	m := decodeManifests(t)
	kinds := map[string]int{}
	for _, o := range m.objs {
		kinds[fmt.Sprintf("%T", o)]++
		meta := o.(metav1.Object)
		if meta.GetName() == "" {
			t.Errorf("%s: no metadata.name", m.from[o])
		}
		if _, ns := o.(*corev1.Namespace); !ns && meta.GetNamespace() != "raftmq" {
			t.Errorf("%s: namespace %q, want raftmq", m.from[o], meta.GetNamespace())
		}
	}
	for _, k := range []string{"*v1.Namespace", "*v1.ConfigMap", "*v1.Deployment", "*v1.Service", "*v1.StatefulSet", "*v1.PodDisruptionBudget"} {
		if kinds[k] == 0 {
			t.Errorf("no %s among the manifests (%v)", k, kinds)
		}
	}
}

// TestK8sSecurityContext checks every pod runs as the image's non-root
// user with a group that owns its volumes, and every container drops all
// capabilities, cannot escalate, and has a read-only root file system.
func TestK8sSecurityContext(t *testing.T) {
	img := readDockerfile(t)
	m := decodeManifests(t)
	if ns := one[*corev1.Namespace](t, m, "raftmq"); ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Error("namespace raftmq does not enforce the restricted Pod Security Standard")
	}
	for name, tmpl := range podTemplates(m) {
		if tmpl.Spec.HostNetwork || tmpl.Spec.HostPID || tmpl.Spec.HostIPC {
			t.Errorf("%s: uses the host's namespaces", name)
		}
		for _, v := range tmpl.Spec.Volumes {
			if v.ConfigMap == nil && v.EmptyDir == nil && v.Secret == nil && v.PersistentVolumeClaim == nil {
				t.Errorf("%s: volume %s is of a kind the restricted standard may refuse", name, v.Name)
			}
		}
		sc := tmpl.Spec.SecurityContext
		if sc == nil {
			t.Errorf("%s: no pod securityContext", name)
			continue
		}
		if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
			t.Errorf("%s: runAsNonRoot not true", name)
		}
		if sc.RunAsUser == nil || *sc.RunAsUser != img.UID || sc.RunAsGroup == nil || *sc.RunAsGroup != img.GID {
			t.Errorf("%s: runAsUser/runAsGroup %v/%v, want the image's %d:%d", name, deref(sc.RunAsUser), deref(sc.RunAsGroup), img.UID, img.GID)
		}
		// Without fsGroup a fresh PVC is root-owned and the broker cannot
		// create its store.
		if sc.FSGroup == nil || *sc.FSGroup != img.GID {
			t.Errorf("%s: fsGroup %v, want %d", name, deref(sc.FSGroup), img.GID)
		}
		if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: seccompProfile is not RuntimeDefault", name)
		}
		for _, c := range append(slices.Clone(tmpl.Spec.InitContainers), tmpl.Spec.Containers...) {
			cn := name + " container " + c.Name
			cs := c.SecurityContext
			if cs == nil {
				t.Errorf("%s: no securityContext", cn)
				continue
			}
			if cs.AllowPrivilegeEscalation == nil || *cs.AllowPrivilegeEscalation {
				t.Errorf("%s: allowPrivilegeEscalation not false", cn)
			}
			if cs.Privileged != nil && *cs.Privileged {
				t.Errorf("%s: privileged", cn)
			}
			if cs.Capabilities == nil || !slices.Equal(cs.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(cs.Capabilities.Add) > 0 {
				t.Errorf("%s: capabilities %+v, want drop [ALL] and no add", cn, cs.Capabilities)
			}
			for _, p := range c.Ports {
				if p.HostPort != 0 {
					t.Errorf("%s: hostPort %d", cn, p.HostPort)
				}
			}
			if cs.ReadOnlyRootFilesystem == nil || !*cs.ReadOnlyRootFilesystem {
				t.Errorf("%s: readOnlyRootFilesystem not true", cn)
			}
			if cs.RunAsUser != nil && *cs.RunAsUser != img.UID || cs.RunAsNonRoot != nil && !*cs.RunAsNonRoot {
				t.Errorf("%s: overrides the pod's user", cn)
			}
		}
	}
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestK8sWiring checks the references between objects: every volume mount
// names a volume, Services select pods and target ports they declare, the
// probes use declared ports, the image exposes every container port, and
// the PodDisruptionBudget selects the StatefulSet's pods.
func TestK8sWiring(t *testing.T) {
	img := readDockerfile(t)
	m := decodeManifests(t)
	tmpls := podTemplates(m)
	claims := map[string]bool{}
	for _, s := range all[*appsv1.StatefulSet](m) {
		for _, c := range s.Spec.VolumeClaimTemplates {
			claims[c.Name] = true
		}
		if !matches(s.Spec.Selector.MatchLabels, s.Spec.Template.Labels) {
			t.Errorf("StatefulSet %s: selector does not match its pod labels", s.Name)
		}
	}
	for _, d := range all[*appsv1.Deployment](m) {
		if !matches(d.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
			t.Errorf("Deployment %s: selector does not match its pod labels", d.Name)
		}
	}
	for name, tmpl := range tmpls {
		vols := map[string]bool{}
		for _, v := range tmpl.Spec.Volumes {
			vols[v.Name] = true
			if v.ConfigMap != nil {
				one[*corev1.ConfigMap](t, m, v.ConfigMap.Name)
			}
		}
		for _, c := range append(slices.Clone(tmpl.Spec.InitContainers), tmpl.Spec.Containers...) {
			for _, vm := range c.VolumeMounts {
				if !vols[vm.Name] && !(claims[vm.Name] && strings.HasPrefix(name, "StatefulSet")) {
					t.Errorf("%s container %s: mount %s names no volume", name, c.Name, vm.Name)
				}
			}
		}
		for _, c := range tmpl.Spec.Containers {
			for _, p := range c.Ports {
				if !slices.Contains(img.Expose, port{int(p.ContainerPort), string(p.Protocol)}) {
					t.Errorf("%s container %s: port %d/%s is not EXPOSEd by the Dockerfile", name, c.Name, p.ContainerPort, p.Protocol)
				}
			}
			for _, pr := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
				if pr == nil || pr.HTTPGet == nil {
					t.Errorf("%s container %s: no HTTP readiness or liveness probe", name, c.Name)
					continue
				}
				if _, ok := containerPort(tmpl, pr.HTTPGet.Port.String(), corev1.ProtocolTCP); !ok {
					t.Errorf("%s container %s: probe port %s is not declared", name, c.Name, pr.HTTPGet.Port.String())
				}
			}
		}
	}
	for _, svc := range all[*corev1.Service](m) {
		var sel *corev1.PodTemplateSpec
		for _, tmpl := range tmpls {
			if matches(svc.Spec.Selector, tmpl.Labels) {
				sel = tmpl
			}
		}
		if sel == nil {
			t.Errorf("Service %s selects no pods", svc.Name)
			continue
		}
		for _, p := range svc.Spec.Ports {
			target := p.TargetPort.String()
			if p.TargetPort.IntVal == 0 && p.TargetPort.StrVal == "" {
				target = fmt.Sprint(p.Port)
			}
			if cp, ok := containerPort(sel, target, p.Protocol); !ok || cp != p.Port && p.TargetPort.IntVal == 0 && p.TargetPort.StrVal == "" {
				t.Errorf("Service %s port %s (%d/%s) targets no container port", svc.Name, p.Name, p.Port, p.Protocol)
			}
		}
	}
	for _, pdb := range all[*policyv1.PodDisruptionBudget](m) {
		sts := one[*appsv1.StatefulSet](t, m, pdb.Name)
		if !matches(pdb.Spec.Selector.MatchLabels, sts.Spec.Template.Labels) || pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
			t.Errorf("PodDisruptionBudget %s: must select StatefulSet %s's pods with maxUnavailable 1", pdb.Name, sts.Name)
		}
	}
}

// matches reports whether every selector label is among labels.
func matches(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// containerPort resolves a port name or number among the pod's container
// ports.
func containerPort(tmpl *corev1.PodTemplateSpec, nameOrNum string, proto corev1.Protocol) (int32, bool) {
	for _, c := range tmpl.Spec.Containers {
		for _, p := range c.Ports {
			if (p.Name == nameOrNum || fmt.Sprint(p.ContainerPort) == nameOrNum) && p.Protocol == proto {
				return p.ContainerPort, true
			}
		}
	}
	return 0, false
}

// containerPorts are a container's declared ports.
func containerPorts(c corev1.Container) []port {
	var out []port
	for _, p := range c.Ports {
		out = append(out, port{int(p.ContainerPort), string(p.Protocol)})
	}
	return sortPorts(out)
}

// confPath returns the file a container reads with "-c FILE".
func confPath(t *testing.T, c corev1.Container) string {
	t.Helper()
	args := append(slices.Clone(c.Command), c.Args...)
	i := slices.Index(args, "-c")
	if i < 0 || i+1 >= len(args) {
		t.Fatalf("container %s: no -c FILE in %v", c.Name, args)
	}
	return args[i+1]
}

// writable reports whether path lies on a writable volume mount of c
// (the root file system is read-only).
func writable(tmpl *corev1.PodTemplateSpec, c corev1.Container, p string) bool {
	readOnly := map[string]bool{}
	for _, v := range tmpl.Spec.Volumes {
		readOnly[v.Name] = v.ConfigMap != nil || v.Secret != nil
	}
	for _, vm := range c.VolumeMounts {
		if underDir(p, vm.MountPath) && !vm.ReadOnly && !readOnly[vm.Name] {
			return true
		}
	}
	return false
}

// TestK8sBrokerConfRendersPerOrdinal renders the StatefulSet's conf
// template as the init container does for ordinals 0..2 and checks that
// each loads and validates, names its own member, that dLegerPeers names
// exactly the StatefulSet's pods behind its headless Service, and that the
// conf's ports are the container's and its store is on the data volume.
func TestK8sBrokerConfRendersPerOrdinal(t *testing.T) {
	m := decodeManifests(t)
	sts := one[*appsv1.StatefulSet](t, m, "broker-a")
	spec := sts.Spec
	if spec.Replicas == nil || *spec.Replicas != 3 || spec.PodManagementPolicy != appsv1.ParallelPodManagement || len(spec.VolumeClaimTemplates) != 1 {
		t.Errorf("StatefulSet %s: want 3 replicas, Parallel pod management and one volume claim template", sts.Name)
	}
	svc := one[*corev1.Service](t, m, spec.ServiceName)
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("Service %s: want headless with publishNotReadyAddresses (members resolve each other before ready)", svc.Name)
	}
	var tmpl string
	for _, v := range spec.Template.Spec.Volumes {
		if v.ConfigMap != nil {
			tmpl = one[*corev1.ConfigMap](t, m, v.ConfigMap.Name).Data["broker.conf.tmpl"]
		}
	}
	if tmpl == "" {
		t.Fatal("StatefulSet mounts no ConfigMap with broker.conf.tmpl")
	}
	if len(spec.Template.Spec.Containers) != 1 || len(spec.Template.Spec.InitContainers) != 1 {
		t.Fatal("want one init container (renders the conf) and one broker container")
	}
	c := spec.Template.Spec.Containers[0]
	conf := confPath(t, c)
	if script := strings.Join(spec.Template.Spec.InitContainers[0].Command, " "); !strings.Contains(script, "> "+conf) {
		t.Errorf("init container does not write %s", conf)
	}
	for ord := 0; ord < 3; ord++ {
		self := fmt.Sprintf("n%d", ord)
		text := strings.NewReplacer("@SELF_ID@", self, "@POD_IP@", fmt.Sprintf("10.0.0.1%d", ord)).Replace(tmpl)
		cfg := loadBroker(t, writeTemp(t, "broker.conf", text))
		monitorReachable(t, "broker "+self, cfg.MetricsPort, cfg.MetricsBindAddr)
		if cfg.Raft.DLegerSelfID != self {
			t.Errorf("ordinal %d: dLegerSelfId %q", ord, cfg.Raft.DLegerSelfID)
		}
		peers, err := raftlog.ParsePeers(cfg.Raft.DLegerPeers)
		if err != nil {
			t.Fatal(err)
		}
		if len(peers) != int(*spec.Replicas) {
			t.Fatalf("dLegerPeers has %d members, want %d", len(peers), *spec.Replicas)
		}
		for i, p := range peers {
			wantHost := fmt.Sprintf("%s-%d.%s.%s.svc.cluster.local:", sts.Name, i, spec.ServiceName, sts.Namespace)
			if p.ID != fmt.Sprintf("n%d", i) || !strings.HasPrefix(p.Addr, wantHost) {
				t.Errorf("peer %d is %s-%s, want n%d-%s…", i, p.ID, p.Addr, i, wantHost)
			}
		}
		if got, want := containerPorts(c), brokerPorts(t, cfg); !slices.Equal(got, want) {
			t.Errorf("ordinal %d: container ports %v, conf listens on %v", ord, got, want)
		}
		if !writable(&spec.Template, c, cfg.Store.StorePathRootDir) {
			t.Errorf("storePathRootDir %s is not on a writable volume", cfg.Store.StorePathRootDir)
		}
		var onClaim bool
		for _, vm := range c.VolumeMounts {
			onClaim = onClaim || vm.Name == spec.VolumeClaimTemplates[0].Name && underDir(cfg.Store.StorePathRootDir, vm.MountPath)
		}
		if !onClaim {
			t.Errorf("storePathRootDir %s is not on the PVC", cfg.Store.StorePathRootDir)
		}
	}
}

func TestK8sNamesrvConfLoads(t *testing.T) {
	m := decodeManifests(t)
	d := one[*appsv1.Deployment](t, m, "raftmq-namesrv")
	c := d.Spec.Template.Spec.Containers[0]
	conf := confPath(t, c)
	var text string
	for _, vm := range c.VolumeMounts {
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == vm.Name && v.ConfigMap != nil && path.Dir(conf) == vm.MountPath {
				text = one[*corev1.ConfigMap](t, m, v.ConfigMap.Name).Data[path.Base(conf)]
			}
		}
	}
	if text == "" {
		t.Fatalf("%s is not a key of a mounted ConfigMap", conf)
	}
	cfg := loadNamesrv(t, writeTemp(t, "namesrv.conf", text))
	if !cfg.GossipEnable {
		t.Error("name server conf does not enable gossip")
	}
	monitorReachable(t, "namesrv", cfg.MetricsPort, cfg.MetricsBindAddr)
	if got, want := containerPorts(c), namesrvPorts(cfg); !slices.Equal(got, want) {
		t.Errorf("container ports %v, conf listens on %v", got, want)
	}
	if !writable(&d.Spec.Template, c, cfg.KVConfigPath) {
		t.Errorf("kvConfigPath %s is not on a writable volume", cfg.KVConfigPath)
	}
}
