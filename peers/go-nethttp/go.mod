module blocklab/peers/go-nethttp

go 1.26
