module github.com/sluicehq/sluice/bench

go 1.26.0

require github.com/sluicehq/sluice v0.0.0

require (
	github.com/benbjohnson/clock v1.3.0 // indirect
	github.com/cespare/xxhash/v2 v2.2.0 // indirect
	github.com/dgryski/go-rendezvous v0.0.0-20200823014737-9f7001d12a5f // indirect
	github.com/failsafe-go/failsafe-go v0.9.8 // indirect
	github.com/go-kratos/aegis v0.2.0 // indirect
	github.com/go-redis/redis_rate/v10 v10.0.1 // indirect
	github.com/platinummonkey/go-concurrency-limits v0.8.0 // indirect
	github.com/redis/go-redis/v9 v9.0.2 // indirect
	github.com/sony/gobreaker/v2 v2.4.0 // indirect
	go.uber.org/ratelimit v0.3.1 // indirect
	golang.org/x/time v0.16.0 // indirect
)

replace github.com/sluicehq/sluice => ../
