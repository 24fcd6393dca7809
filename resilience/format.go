package resilience

import (
	"fmt"
	"time"
)

func formatValue(v any) string {
	switch v := v.(type) {
	case time.Duration:
		return v.String()
	case string:
		return fmt.Sprintf("%q", v)
	}
	return fmt.Sprint(v)
}
