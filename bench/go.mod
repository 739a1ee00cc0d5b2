module github.com/sluicehq/sluice/bench

go 1.26.0

require (
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/sluicehq/sluice v0.0.0
	github.com/sony/gobreaker/v2 v2.4.0
)

require (
	github.com/benbjohnson/clock v1.3.0 // indirect
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/go-kratos/aegis v0.2.0 // indirect
	github.com/platinummonkey/go-concurrency-limits v0.8.0 // indirect
	go.uber.org/ratelimit v0.3.1 // indirect
	golang.org/x/time v0.16.0 // indirect
)

replace github.com/sluicehq/sluice => ../
