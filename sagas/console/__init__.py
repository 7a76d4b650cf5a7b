"""Reads behind the operator console in the Django admin (sagas/admin.py): the approval queue, the recovery list,
the saga detail with its DAG picture, the dashboard and the policy page.

Reads only: every change an operator makes goes through sagas.coordinator. Every function takes the acting
Principal (governance.identity.operators.principal_for_user) and sees that principal's tenant alone.
"""
