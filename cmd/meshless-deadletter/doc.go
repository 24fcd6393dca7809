// Command meshless-deadletter lists, inspects, requeues and purges the
// entries of meshless dead-letter queues (package deadletter), in a local
// bbolt file or in Redis.
//
//	meshless-deadletter -file /var/lib/app/deadletter.db keys
//	meshless-deadletter -redis redis:6379 -namespace payments-client list pkg.Svc parked
//	meshless-deadletter -redis redis:6379 requeue pkg.Svc -all
//
// Run it with -h for every command and flag.
package main
