// Package kubegen writes the Kubernetes overlays of a cluster: one Kustomize
// overlay per region (site), each a kustomization.yaml on top of the shared
// base in deploy/k8s/base and the region's site.yaml, a real siteconfig file
// that the overlay turns into the ConfigMap the site's pod mounts.
//
// The one idea: everything that differs between regions is data written
// here (the namespace, the site config with its peers' addresses); the
// base's manifests, the same for every region, are written by hand and fix
// the names, ports and mount paths that this package's constants repeat.
// A region's peers are reached at their StatefulSet pod's stable DNS name
// under the headless peer Service, stabilizer-0.stabilizer-peers.<region>.
// svc.cluster.local, unless an address is given for the region (one cluster
// per region, reached through a load balancer or a DNS name of its own).
//
// # Usage
//
//	dirs, err := kubegen.Write(kubegen.Options{Sites: sites, Groups: groups, Dir: "deploy/k8s/overlays"})
//
// Output is deterministic: the same options write the same bytes, so the
// committed overlays can be checked against a fresh run.
package kubegen
