package circuitbreaker

// breakerConf returns DefaultConfig() with edit applied: the tests' way to set
// a few fields of a Config.
func breakerConf(edit func(*Config)) Config {
	c := DefaultConfig()
	edit(&c)
	return c
}
