package timeout

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// The path of a call that ends in time, on the real clock. The sync mode
// allocates only what context.WithTimeout does; Async adds a goroutine and
// a channel.
func BenchmarkTimeout(b *testing.B) {
	for _, bc := range []struct {
		name  string
		async bool
	}{{"sync", false}, {"async", true}} {
		b.Run(bc.name, func(b *testing.B) {
			p, err := New(Options{Timeout: time.Hour, Async: bc.async})
			if err != nil {
				b.Fatal(err)
			}
			next := func(context.Context) sluice.Result { return sluice.Result{} }
			ctx := context.Background()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if r := p.Run(ctx, next); r.Err != nil {
						b.Fatal(r.Err)
					}
				}
			})
		})
	}
}
