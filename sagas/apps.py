from django.apps import AppConfig


class SagasConfig(AppConfig):
    name = "sagas"
    verbose_name = "Sagas"
    default = True  # what INSTALLED_APPS' "sagas" means (this module has a second config, below)

    def ready(self) -> None:
        # Registers the Celery tasks in every process, not only in workers (where Celery's autodiscovery finds
        # them): without a broker, the embedded executor runs the very task a nudge names (coordinator.nudges).
        from sagas import tasks  # noqa: F401
        from sagas.protocols.proxy import checks  # noqa: F401  (registers the SAGA_PROXY_CONFIG check)


class OperatorSagasConfig(SagasConfig):
    """The same app in an operator verb's lighter set-up (saga_project.operator_settings), without the Celery tasks:
    those verbs read rows or decide a held call and run nothing, so they load no Celery. A nudge sent from such a
    process anyway is dropped with a warning, as one the broker refused is (sagas.coordinator.execution.nudges): the
    recovery sweep of the process that runs the saga's work sends it again."""

    default = False

    def ready(self) -> None:
        from sagas.protocols.proxy import checks  # noqa: F401  (registers the SAGA_PROXY_CONFIG check)
