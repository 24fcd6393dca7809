// Package deadlettertest helps test code that uses package deadletter: an
// in-memory [Store] (what the durable stores do, without durability; it
// also injects store errors and corrupt entries), and [TestStore], the
// contract that every deadletter.Store implementation passes — the bbolt
// and Redis stores run it in their own tests.
//
//	store := deadlettertest.NewStore(nil)
//	q, err := deadletter.New(store, deadletter.Config{})
package deadlettertest
