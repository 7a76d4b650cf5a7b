from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "audit"
    verbose_name = "Audit evidence"

    def ready(self) -> None:
        # Every process (web, worker, command) exports spans when OTEL_EXPORTER_OTLP_ENDPOINT is set.
        from audit import telemetry

        telemetry.configure()
