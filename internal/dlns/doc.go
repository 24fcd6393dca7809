// Package dlns checks the namespace of a Redis dead-letter store
// (deadletter/redisstore), for the store and for the configuration, so
// that a namespace the store would refuse is a configuration error naming
// its key (deadLetter.namespace) at load and at reload, not a queue that
// fails to open at a method's first call.
package dlns
