import { RemovalPolicy } from "aws-cdk-lib";
import * as secretsmanager from "aws-cdk-lib/aws-secretsmanager";
import { Construct } from "constructs";

/**
 * The four secrets of a deployment (layout: lib/deploy/secret-layout.ts). The stack creates
 * them empty of certificates: a placeholder object the tasks cannot start with, so that the only
 * PEMs ever stored are the ones the operator puts there with `kgw pki` and the AWS CLI
 * (docs/DEPLOY.md), and none passes through CloudFormation. Kept when the stack is deleted.
 */
export class GatewaySecrets extends Construct {
  /** Operator only: signs tenants' certificates (kgw tenant --ca-secret). */
  readonly gatewayCa: secretsmanager.Secret;
  /** Tasks: the serving certificate of ports 8132 and 8443, and the gateway CA's certificate. */
  readonly gatewayTls: secretsmanager.Secret;
  /** Operator only: signs the peer certificate. */
  readonly peerCa: secretsmanager.Secret;
  /** Tasks: the peer certificate (URI SAN kgw://fleet/peer) and the peer CA's certificate. */
  readonly peerTls: secretsmanager.Secret;

  constructor(scope: Construct, id: string) {
    super(scope, id);
    const secret = (name: string, description: string) => {
      const s = new secretsmanager.Secret(this, name, {
        description,
        // A fixed placeholder, not a generated value: a random string would look like a
        // credential and be one nobody uses.
        secretObjectValue: {},
      });
      s.applyRemovalPolicy(RemovalPolicy.RETAIN);
      return s;
    };
    this.gatewayCa = secret(
      "GatewayCa",
      "kgw gateway CA: certificate and privateKey (operator only; kgw pki ca writes it)",
    );
    this.gatewayTls = secret(
      "GatewayTls",
      "kgw gateway serving certificate for 8132/8443: certificate, privateKey, caCertificate (the tasks)",
    );
    this.peerCa = secret("PeerCa", "kgw peer CA: certificate and privateKey (operator only)");
    this.peerTls = secret(
      "PeerTls",
      "kgw peer certificate between gateway tasks: certificate, privateKey, caCertificate (the tasks)",
    );
  }
}
