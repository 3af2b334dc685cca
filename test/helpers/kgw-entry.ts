import { run } from "../../services/kgw.js";

process.exitCode = await run(process.argv.slice(2), process.env);
