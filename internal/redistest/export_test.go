package redistest

// SetPickPort makes Start take its ports from f until restore is called;
// f may call PickPort for a free one.
func SetPickPort(f func() (int, error)) (restore func()) {
	old := pickPort
	pickPort = f
	return func() { pickPort = old }
}

// PickPort is the port picker Start uses by default.
var PickPort = pickPort

// Answers is the check Start and Restart make before they hand a server out.
var Answers = answers
