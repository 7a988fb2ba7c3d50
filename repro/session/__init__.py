"""A plan executed: ``repro run``'s session from its request (:mod:`repro.session.run`), its runs trained here
one after another, or handed to a launcher as jobs; ``repro report``'s session from its request
(:mod:`repro.session.report`)."""
