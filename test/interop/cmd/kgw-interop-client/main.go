package main

import (
	_ "google.golang.org/grpc"
	_ "sigs.k8s.io/apiserver-network-proxy/konnectivity-client/pkg/client"
)

func main() {}
