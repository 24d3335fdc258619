//! What a tc does when data nodes fail (docs/design/failures.md §6): it
//! routes around them. Every table's map loses the failed nodes'
//! replicas (the next replica in chain order becomes primary where the
//! primary failed) and takes the new membership's id as its version, so
//! the next reply tells each client to refresh its maps.

use crate::Tc;
use kernel::Context;
use signal::signals::NodeFailRep;
use signal::BlockRef;
use std::sync::Arc;

impl Tc {
    /// NODE_FAILREP: new operations route around the failed nodes.
    pub(crate) fn node_failed(
        &mut self,
        from: BlockRef,
        report: NodeFailRep,
        ctx: &mut dyn Context,
    ) {
        let failed = self
            .node_failures
            .install(self.config.address, from, &report, ctx);
        if failed.is_empty() {
            return;
        }
        let membership_id = self.node_failures.membership_id();
        for route in self.tables.iter_mut().flatten() {
            let map = Arc::new(route.map.without(failed, membership_id));
            self.map_version = self.map_version.max(map.version);
            route.map = map;
        }
    }
}
