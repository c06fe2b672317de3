// Package siteconfig is the configuration file of one stabilizerd site:
// who it is, every site of the cluster and how to reach it, where it listens,
// where it keeps its data and which named predicates it knows.
//
// The one idea: every site of a cluster lists the same sites in the same
// order (that order is the `sites` of the predicate language), but each
// site's file gives the addresses by which *it* reaches the others, so an
// emulated WAN can put a different link proxy in front of every pair.
//
// # Usage
//
//	cfg, err := siteconfig.Load("us-east-1.yaml") // every bad field is reported
//	files, err := siteconfig.Generate(siteconfig.GenerateOptions{Sites: ..., Dir: dir})
package siteconfig
