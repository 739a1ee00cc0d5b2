package retry

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice"
)

// The success path: one attempt, a deposit in the budget, nothing else. It
// must not allocate.
func BenchmarkRetrySuccess(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts Options
	}{
		{"budget", Options{}},
		{"nobudget", Options{NoBudget: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p, err := New(bc.opts)
			if err != nil {
				b.Fatal(err)
			}
			next := func(context.Context) sluice.Result { return sluice.Result{} }
			ctx := context.Background()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if r := p.Run(ctx, next); r.Class != sluice.Success {
						b.Fatal(r.Err)
					}
				}
			})
		})
	}
}

// The success path through a Guard and Do, as callers use it; the Guard's
// own cost for a flow policy (the closure and the boxed value) is included.
func BenchmarkRetryDo(b *testing.B) {
	p, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	g := sluice.New(p)
	fn := func(context.Context) (int, error) { return 1, nil }
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := sluice.Do(ctx, g, fn); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkBudget(b *testing.B) {
	budget, err := NewBudget(BudgetOptions{Ratio: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("Deposit", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				budget.Deposit()
			}
		})
	})
	b.Run("DepositTryWithdraw", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				budget.Deposit()
				budget.TryWithdraw()
			}
		})
	})
}
