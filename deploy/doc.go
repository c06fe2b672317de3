// Package deploy holds the tests of the deployment files beside it: the
// Kubernetes base and overlays (k8s/), the docker compose cluster
// (compose/) and the image (Dockerfile). It is a module of its own so that
// Kubernetes', Kustomize's and compose's libraries stay out of the main
// module.
//
// The one idea: the files are checked the way their tools read them. Each
// overlay is rendered in-process by Kustomize, every object decoded strictly
// into the Kubernetes API types, and every site config the files carry is
// passed to `stabilizerd check`, built once from the repository's root; the
// names, ports and paths of the manifests are then compared with the site
// config they run.
//
// # Usage
//
//	cd deploy && go test ./...
//
// The docker build runs only where a docker daemon answers and the base
// images are already present; no test downloads an image.
package deploy
