// Must stay the first import: @peculiar/x509 (via tsyringe) needs the Reflect metadata API at load.
import "reflect-metadata";
import { webcrypto } from "node:crypto";
import * as x509 from "@peculiar/x509";

// The library looks its WebCrypto implementation up in a process-wide registry; doing it here means
// nothing can use the library before Node's implementation is registered.
x509.cryptoProvider.set(webcrypto);

/**
 * @peculiar/x509, ready to use. Import it from here, never from the package directly, so the
 * set-up above is guaranteed to have run first.
 */
export { x509 };
