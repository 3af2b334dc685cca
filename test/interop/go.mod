module konnectivity-gateway/test/interop

go 1.26.2

tool (
	sigs.k8s.io/apiserver-network-proxy/cmd/agent
	sigs.k8s.io/apiserver-network-proxy/cmd/server
)

require (
	sigs.k8s.io/apiserver-network-proxy v0.36.0 // indirect
	sigs.k8s.io/apiserver-network-proxy/konnectivity-client v0.37.1 // indirect
)
