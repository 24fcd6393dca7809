// Package clusterkey holds the rule that keeps the cluster's Redis keys of
// two namespaces apart, shared by the cluster's settings (which refuse a
// namespace that breaks it) and by the namespaces grpcmw derives from a
// target (which never break it).
package clusterkey
