package cluster

// Deliver hands payload to c as if it had come on the channel.
func Deliver(c *Cluster, payload string) { c.deliver(payload) }

// ClaimOpenSHA is the SHA1 of the script that claims an open.
var ClaimOpenSHA = claimOpen.Hash()
