package bench

// Registers grpc-go's outlier_detection_experimental balancer (gRFC A50),
// which only the xds import makes reachable, for the side-by-side test.
import _ "google.golang.org/grpc/xds"
