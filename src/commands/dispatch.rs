//! The one dispatcher: gives a planned command what it needs (its place, the pager, the signals) and takes it all down again, however the run ends.

use anyhow::Result;
use tokio::sync::watch;

use super::command::{Command, Given, OnSignal, Place, Stop};
use crate::report;
use crate::report::pager::Pager;
use crate::signals::{Interrupted, Signals};

/// Runs a planned command to the end. Its plan was made before anything
/// opened, so a plan that fails starts nothing.
pub async fn dispatch<C: Command>(command: C, signals: &mut Signals) -> Result<()> {
    let needs = command.needs();
    if needs.verdict {
        report::verdict_awaited();
    }
    let pager = report::pager::start(needs.pager);
    let on_signal = needs.on_signal;
    let ran = on_its_place(command, needs.place, pager.is_some(), on_signal, signals).await;
    let ran = paged_to_the_end(pager, ran, signals).await;
    match (ran, on_signal) {
        // A signal is how such a run ends: what it opened is closed by now.
        (Err(err), OnSignal::Ends(word)) if err.is::<Interrupted>() => {
            eprintln!("{}", word());
            Ok(())
        }
        (ran, _) => ran,
    }
}

/// Opens the command's place, runs the command on it while watching the
/// signals, and closes the place again, also when the run fails or a
/// signal stops it.
async fn on_its_place<C: Command>(
    command: C,
    options: <C::On as Place>::Options,
    paged: bool,
    on_signal: OnSignal,
    signals: &mut Signals,
) -> Result<()> {
    // A signal during start-up abandons the place, whose drop cleans up
    // what was started.
    let place = tokio::select! {
        biased;
        signal = signals.received() => return Err(signal.into()),
        place = C::On::open(options) => place?,
    };
    let (tell, told) = watch::channel(None);
    let given = Given {
        paged,
        stop: Stop(told),
    };
    let outcome = {
        let run = command.run(&place, given);
        tokio::pin!(run);
        let mut signalled = false;
        loop {
            tokio::select! {
                biased;
                signal = signals.received(), if !signalled => match on_signal {
                    OnSignal::Tells => {
                        tell.send_replace(Some(signal));
                        signalled = true;
                    }
                    OnSignal::Stops | OnSignal::Ends(_) => break Err(signal.into()),
                },
                outcome = &mut run => break outcome,
            }
        }
    };
    let closed = place.close().await;
    outcome.and(closed)
}

/// Closes the pager, if there is one, once the run has ended as `ran`; a
/// signal while the pager is open ends the run too, unless it had failed
/// already. After a signal nobody waits for a pager that ignores it.
async fn paged_to_the_end(
    pager: Option<Pager>,
    ran: Result<()>,
    signals: &mut Signals,
) -> Result<()> {
    let Some(pager) = pager else {
        return ran;
    };
    // Stopped by a signal already: dropping it ends the pager.
    if crate::db::child::stop_requested() {
        drop(pager);
        return ran;
    }
    let closed = pager.close(signals.received()).await;
    ran.and(closed.map_err(Into::into))
}
