// Package buildinfo says which build of the project a binary is: the
// module version and the VCS revision Go stamped into it. Every binary's
// --version and the site's stabilizer_build_info metric read it, so that
// a bug report, a log line and a dashboard name the same build.
package buildinfo
