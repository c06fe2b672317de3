package kubegen

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/stabilizer/stabilizer/cmd/internal/siteconfig"
)

// What the base's manifests (deploy/k8s/base) fix and the generated site
// configs must agree with; the deploy module's tests hold the two together.
const (
	// Ports every site listens on in its pod.
	DataPort    = 7100
	ControlPort = 7101
	ClientPort  = 7102
	HTTPPort    = 8080

	// StatefulSet and PeerService name a site's pod DNS name:
	// <StatefulSet>-0.<PeerService>.<region>.svc.cluster.local.
	StatefulSet = "stabilizer"
	PeerService = "stabilizer-peers"
	// ConfigMap is the name of the generated ConfigMap (before Kustomize's
	// hash suffix), ConfigFile its one key.
	ConfigMap  = "stabilizer-config"
	ConfigFile = "site.yaml"

	// DataMount is where the data volume is mounted; DataDir, the site's
	// data_dir, is a folder in it, so that its sibling data_dir.snapshots
	// (state transfer) is on the volume too and not on the read-only root.
	DataMount = "/var/lib/stabilizer"
	DataDir   = DataMount + "/data"
	// TLSMount is where the Secret stabilizer-tls is mounted, with the keys
	// tls.crt, tls.key and ca.crt.
	TLSMount = "/etc/stabilizer/tls"
)

// Options describe the overlays to write.
type Options struct {
	// Sites are the regions, in configuration order; each is a namespace.
	Sites []string
	// Groups maps a group name to its member sites; optional.
	Groups map[string][]string
	// Predicates are added to every site's config; optional.
	Predicates map[string]string
	// Dir gets one folder per region. The overlays refer to the base as
	// ../../base, so Dir sits beside it (deploy/k8s/overlays).
	Dir string
	// Addresses maps a region to the host by which the other regions reach
	// it. Default: the pod's name under the headless Service in the
	// region's namespace, for every region in one cluster.
	Addresses map[string]string
	// Image, if set, replaces the base's image (stabilizer:dev) in every
	// overlay, e.g. registry.example.com/stabilizer:v1.2.
	Image string
}

// dns1123 is a Kubernetes namespace name: a DNS label.
var dns1123 = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// PodHost is the default host of a region's site: its pod's DNS name.
func PodHost(region string) string {
	return fmt.Sprintf("%s-0.%s.%s.svc.cluster.local", StatefulSet, PeerService, region)
}

// Write writes Dir/<region>/kustomization.yaml, site.yaml and
// namespace.yaml for every region, replacing earlier ones, and returns the folders. Bad
// options are reported together, each naming its flag.
func Write(o Options) ([]string, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	var dirs []string
	for _, region := range o.Sites {
		cfg, err := o.siteConfig(region)
		if err != nil {
			return nil, err
		}
		dir := filepath.Join(o.Dir, region)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("genconfig: %w", err)
		}
		for name, data := range map[string][]byte{ConfigFile: cfg, "namespace.yaml": namespace(region),
			"kustomization.yaml": o.kustomization(region)} {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				return nil, fmt.Errorf("genconfig: %w", err)
			}
		}
		dirs = append(dirs, dir)
	}
	return dirs, nil
}

func (o *Options) check() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if o.Dir == "" {
		bad("--kubernetes: missing: the folder for the overlays")
	}
	if len(o.Sites) == 0 {
		bad("--sites/--topology: no sites given")
	}
	for _, s := range o.Sites {
		if len(s) > 63 || !dns1123.MatchString(s) {
			bad("--sites/--topology: site %q cannot name a namespace: lowercase letters, digits and '-', at most 63", s)
		}
	}
	for _, region := range slices.Sorted(maps.Keys(o.Addresses)) {
		host := o.Addresses[region]
		switch {
		case !slices.Contains(o.Sites, region):
			bad("--address %s=%s: unknown site %q (sites: %s)", region, host, region, strings.Join(o.Sites, ", "))
		case host == "" || strings.ContainsAny(host, "/ "):
			bad("--address %s=%q: not a host name or IP address", region, host)
		case strings.Contains(host, ":") && net.ParseIP(host) == nil:
			bad("--address %s=%s: give a host without a port (the ports are fixed: data %d, control %d, client %d)",
				region, host, DataPort, ControlPort, ClientPort)
		}
	}
	if o.Image != "" && (strings.ContainsAny(o.Image, " @") || strings.HasSuffix(o.Image, ":")) {
		bad("--image %q: not name[:tag]", o.Image)
	}
	return errors.Join(errs...)
}

// host returns the host by which the others reach region.
func (o *Options) host(region string) string {
	if h, ok := o.Addresses[region]; ok {
		return h
	}
	return PodHost(region)
}

// siteConfig returns region's site.yaml, checked by siteconfig.Parse.
func (o *Options) siteConfig(region string) ([]byte, error) {
	c := siteconfig.Config{
		Site: region, Cluster: siteconfig.DefaultCluster, Groups: o.Groups, Predicates: o.Predicates,
		Listen: siteconfig.Listen{Data: listen(DataPort), Control: listen(ControlPort),
			Client: listen(ClientPort), HTTP: listen(HTTPPort)},
		DataDir: DataDir,
		TLS: siteconfig.TLS{Cert: TLSMount + "/tls.crt", Key: TLSMount + "/tls.key",
			CA: TLSMount + "/ca.crt"},
		Lin: siteconfig.Lin{Voters: o.Sites, Preferred: o.Sites[0]},
	}
	for _, peer := range o.Sites {
		s := siteconfig.Site{Name: peer}
		if peer != region {
			h := o.host(peer)
			s.Data = net.JoinHostPort(h, strconv.Itoa(DataPort))
			s.Control = net.JoinHostPort(h, strconv.Itoa(ControlPort))
			s.Client = net.JoinHostPort(h, strconv.Itoa(ClientPort))
		}
		c.Sites = append(c.Sites, s)
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&c); err != nil {
		return nil, fmt.Errorf("genconfig: %w", err)
	}
	data := buf.Bytes()
	if _, err := siteconfig.Parse(data); err != nil {
		return nil, fmt.Errorf("genconfig: site %s: %w", region, err)
	}
	head := fmt.Sprintf("# Site %s, generated by stabilizerd genconfig --kubernetes; regenerate, do not edit.\n"+
		"# The overlay's configMapGenerator makes it the ConfigMap %s that the pod mounts.\n", region, ConfigMap)
	return append([]byte(head), data...), nil
}

// listen is a listen address on every interface of the pod.
func listen(port int) string { return ":" + strconv.Itoa(port) }

func (o *Options) kustomization(region string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `# Region %s, generated by stabilizerd genconfig --kubernetes; regenerate, do not edit.
# kubectl apply -k . creates the namespace and the site; create the Secret
# stabilizer-tls (tls.crt, tls.key, ca.crt) in it first (deploy/README.md).
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: %s
resources:
  - ../../base
  - namespace.yaml
configMapGenerator:
  - name: %s
    files:
      - %s
labels:
  - pairs:
      stabilizer.io/site: %s
`, region, region, ConfigMap, ConfigFile, region)
	if o.Image != "" {
		name, tag := splitImage(o.Image)
		fmt.Fprintf(&b, "images:\n  - name: stabilizer\n    newName: %s\n", name)
		if tag != "" {
			fmt.Fprintf(&b, "    newTag: %q\n", tag)
		}
	}
	return b.Bytes()
}

// namespace is the namespace.yaml every overlay lists.
func namespace(region string) []byte {
	return fmt.Appendf(nil, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n  labels:\n    stabilizer.io/site: %s\n", region, region)
}

// splitImage splits name:tag at the tag's colon (not a registry's port).
func splitImage(ref string) (name, tag string) {
	i := strings.LastIndex(ref, ":")
	if i < 0 || strings.Contains(ref[i:], "/") {
		return ref, ""
	}
	return ref[:i], ref[i+1:]
}
