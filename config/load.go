package config

import (
	"fmt"
	"io"
	"os"
	"strconv"
)

// ReadFile reads the configuration file at path, for [Parse]. A file larger
// than [MaxConfigSize] is refused, with an [*Error], without being read past
// the limit.
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxConfigSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxConfigSize {
		size := "more than " + strconv.Itoa(MaxConfigSize)
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			size = strconv.FormatInt(fi.Size(), 10)
		}
		return nil, configError(tooLarge(size))
	}
	return data, nil
}

// Load reads and parses the configuration file at path: [ReadFile], then
// [Parse] with checks. Errors start with the path.
func Load(path string, checks ...Check) (*Config, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	cfg, err := Parse(data, checks...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}
